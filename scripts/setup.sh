#!/usr/bin/env bash
# The Python side: a venv with the pinned CPU torch and the package in edit mode.
#
# The dependencies (torch alone unpacks to ~1 GB: ~90 s on this machine's disk) are
# installed once per machine into a shared venv under ~/.cache/trainium-lens/, keyed
# by the dependency lists in pyproject.toml and the Python version; the checkout's
# own `.venv` is small: a venv without pip whose `lens-deps.pth` puts the shared
# site-packages on its path, the package installed in edit mode (pointing at this
# checkout, so two clones on one machine never share it), and links to the shared
# venv's tools (ruff, mypy, lint-imports, pytest). A fresh clone is set up in
# seconds, as scripts/setup-xla.sh and setup-e2e.sh do for theirs.
# A checkout whose `.venv` is a full venv of its own (an older layout) is kept as it
# is and updated in place.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

pip_quiet() { grep -v '^WARNING: Location' || true; }
# pip's configuration (files and PIP_* variables) as uv's options, NUL-separated
uv_from_pip_config() {
  "$PY" -m pip config list 2>/dev/null | "$PY" -c '
import shlex, sys
opts = {"find-links": "--find-links", "index-url": "--index-url", "extra-index-url": "--extra-index-url",
        "constraint": "--constraint"}
seen = set()
for line in sys.stdin:
    key, _, value = line.strip().partition("=")
    flag = opts.get(key.rpartition(".")[2])
    for v in shlex.split(value) if flag else []:
        for item in v.split():
            if (flag, item) not in seen:
                seen.add((flag, item))
                sys.stdout.write(f"{flag}\0{item}\0")
'
}

if [ -x .venv/bin/pip ] && [ ! -f .venv/lens-deps ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test]' 2>&1 | pip_quiet
  .venv/bin/python -c 'import torch, pygls' # fail loudly if the install did not take
  exit 0
fi

# What the shared venv holds: the runtime and test dependencies, and setuptools to
# build the edit-mode install without an isolated build environment.
deps=$("$PY" - <<'PY'
import tomllib

with open("pyproject.toml", "rb") as f:
    toml = tomllib.load(f)
project, build = toml["project"], toml["build-system"]["requires"]
print("\n".join(sorted(set(project["dependencies"] + project["optional-dependencies"]["test"] + build))))
PY
)
key=$(printf '%s\n%s\n' "$deps" "$("$PY" -c 'import sys; print(sys.version)')" | sha256sum | cut -c1-12)
SHARED="${TRAINIUM_LENS_DEPS_VENV:-$HOME/.cache/trainium-lens/venv-deps-$key}"
mkdir -p "$(dirname "$SHARED")"
# one install at a time into the shared venv (two clones' CI on one machine)
exec 9>"$SHARED.lock"
flock 9
if [ ! -f "$SHARED/.complete" ]; then
  echo "setup: installing the dependencies into $SHARED (once per machine)" >&2
  rm -rf "$SHARED"
  "$PY" -m venv "$SHARED"
  printf '%s\n' "$deps" >"$SHARED/requirements.txt"
  # uv (from the registry, into this venv) installs the list; pip where uv is not to be
  # had or fails. Side by side from empty caches, this script took 87 s (91 s of CPU)
  # with pip and 48 s with uv; the install alone 38 s (32 s of CPU) against 6 s (7 s).
  # uv reads no pip configuration, so pip's own is passed on (`pip config list`: this
  # machine's torch +cpu wheel in a find-links folder, local indexes, a constraints
  # file), and every index may offer a version as under pip (pip takes 2.13.0+cpu over
  # PyPI's 2.13.0, a local label sorting higher; uv's default reads only the first index
  # that has the name).
  # Neither byte-compiles what it installs (pip: --no-compile): that was 57 s of pip's
  # 94 s of CPU, most of it for modules nothing imports (transformers' ~2,900 files, most
  # of sympy's). Bytecode is written instead for all of torch (10 s: a user's code may
  # import any of it) and for what the server, the harness and the tests import, by
  # importing it once, so that a machine with PYTHONDONTWRITEBYTECODE set (these are)
  # does not compile them on every run; the rest is compiled where first imported.
  "$SHARED/bin/pip" install -q --disable-pip-version-check uv 2>&1 | pip_quiet
  if ! { [ -x "$SHARED/bin/uv" ] && uv_from_pip_config | xargs -0 "$SHARED/bin/uv" pip install -q \
    --python "$SHARED/bin/python" --index-strategy unsafe-best-match -r "$SHARED/requirements.txt" &&
    ! "$SHARED/bin/python" -c 'from importlib.metadata import distributions as d
print(*(x.metadata["Name"] for x in d() if x.metadata["Name"].lower().startswith("nvidia-")))' | grep -q .; }; then
    # (CUDA libraries where pip takes the +cpu torch are a failure too: gigabytes; read
    # from the installed metadata, as importing torch before its bytecode is written
    # costs 6 s)
    echo "setup: uv did not install the list; pip instead" >&2
    "$SHARED/bin/pip" install -q --disable-pip-version-check --no-compile -r "$SHARED/requirements.txt" 2>&1 | pip_quiet
  fi
  shared_torch=$("$SHARED/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/torch
  # (a file torch keeps for Python 3.12 does not compile on 3.11, as under pip: skipped)
  "$SHARED/bin/python" -m compileall -q -j0 "$shared_torch" >/dev/null 2>&1 || true
  # and fail loudly if the install did not take
  env -u PYTHONDONTWRITEBYTECODE "$SHARED/bin/python" -c 'import setuptools, pygls.lsp.server, lsprotocol.types
import torch, torch._dynamo, torch._inductor.compile_fx, pytest, xdist'
  touch "$SHARED/.complete"
fi

[ -x .venv/bin/python ] || "$PY" -m venv --without-pip .venv
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
shared_site=$("$SHARED/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$shared_site" >"$site/lens-deps.pth"
echo "$SHARED" >.venv/lens-deps
# the shared venv's tools (ruff, mypy, pytest, ...) in this checkout's .venv: a
# binary as a link, a Python script run by this venv's interpreter (which has the
# package as well)
for tool in "$SHARED"/bin/*; do
  name=${tool##*/}
  case $name in python* | activate* | Activate.ps1 | pip*) continue ;; esac
  if head -c 64 "$tool" | head -1 | grep -q '^#!.*python'; then
    rm -f ".venv/bin/$name"
    printf '#!/bin/sh\nexec "$(dirname "$0")/python" "%s" "$@"\n' "$tool" >".venv/bin/$name"
    chmod +x ".venv/bin/$name"
  else
    ln -sfn "$tool" ".venv/bin/$name"
  fi
done
# pip for this venv, from the shared site-packages (installs land in .venv)
printf '#!/bin/sh\nexec "$(dirname "$0")/python" -m pip "$@"\n' >.venv/bin/pip
chmod +x .venv/bin/pip
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | pip_quiet
.venv/bin/python -c 'import torch, pygls, trainium_lens' # fail loudly if the install did not take
