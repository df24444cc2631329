#!/usr/bin/env bash
# The torch-xla side: torch 2.9.0 + torch-xla 2.9.0 (the last torch-xla generation
# torch-neuronx ships for Trn1) on torch-xla's CPU device (PJRT_DEVICE=CPU).
#
# The venv is ~7 GB (PyPI's torch 2.9.0 Linux wheel pulls the CUDA libraries; the
# +cpu build lives only on download.pytorch.org, which is not reachable), so it is
# built once per machine under ~/.cache/trainium-lens/ and `.venv-xla` is a symlink
# to it: a fresh clone (CI right after a session) reuses it in seconds. The package
# is never installed into it (every clone shares it): the targets put the package
# on PYTHONPATH for the harness, and scripts/test-xla.sh does the same.
#
# Idempotent: skips the big install when the venv already has the pinned versions.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH=2.9.0
TORCH_XLA=2.9.0
SHARED="${TRAINIUM_LENS_XLA_VENV:-$HOME/.cache/trainium-lens/venv-xla-$TORCH_XLA}"
PY="${PYTHON:-python3}"

have_versions() {
  "$SHARED/bin/python" - "$TORCH" "$TORCH_XLA" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
want_torch, want_xla = sys.argv[1], sys.argv[2]
ok = version("torch").split("+")[0] == want_torch and version("torch_xla").split("+")[0] == want_xla
version("pytest")
sys.exit(0 if ok else 1)
PY
}

if ! have_versions; then
  echo "setup-xla: installing torch==$TORCH torch-xla==$TORCH_XLA into $SHARED (one time, ~7 GB)" >&2
  start=$(date +%s)
  mkdir -p "$(dirname "$SHARED")"
  [ -x "$SHARED/bin/python" ] || "$PY" -m venv "$SHARED"
  want=("torch==$TORCH" "torch-xla==$TORCH_XLA" numpy "pytest>=8" pyarrow)
  # uv (from the registry, into this venv) rather than pip: measured side by side, pip
  # took 143 s of CPU with its cache warm, uv 57 s with its cache cold (downloads
  # included; Rust unzipping in parallel, nothing byte-compiled). Both read the same
  # index (PyPI: these are not the +cpu builds of scripts/setup.sh's /opt/wheels).
  # Bytecode is then written for torch and torch-xla only (scripts/setup.sh says why).
  "$SHARED/bin/pip" install -q --disable-pip-version-check uv 2>&1 | grep -v '^WARNING: Location' || true
  if [ -x "$SHARED/bin/uv" ]; then
    "$SHARED/bin/uv" pip install -q --python "$SHARED/bin/python" "${want[@]}" || true
    site=$("$SHARED/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    "$SHARED/bin/python" -m compileall -q -j0 "$site/torch" "$site/torch_xla" >/dev/null 2>&1 || true
  else
    "$SHARED/bin/pip" install -q --disable-pip-version-check "${want[@]}" 2>&1 | grep -v '^WARNING: Location' || true
  fi
  have_versions || { echo "setup-xla: install failed (torch $TORCH / torch-xla $TORCH_XLA not importable)" >&2; exit 1; }
  echo "setup-xla: installed in $(( $(date +%s) - start )) s, $(du -sh "$SHARED" | cut -f1)" >&2
fi

# .venv-xla -> the shared venv (replace a stale link; never delete a real directory).
if [ -L .venv-xla ] || [ ! -e .venv-xla ]; then
  ln -sfn "$SHARED" .venv-xla
fi
# fail loudly if the venv cannot run this checkout's harness
# (and write the bytecode of what that imports beyond torch and torch-xla)
PYTHONPATH="$PWD/server" PJRT_DEVICE=CPU env -u PYTHONDONTWRITEBYTECODE .venv-xla/bin/python -c 'import torch, torch_xla, trainium_lens.harness, pytest'
