#!/usr/bin/env bash
# Install the .vsix's Python libraries into DIR (default extension/dist/libs):
# exactly the wheels pinned in extension/requirements-vsix.txt, checked against
# their hashes (pip --require-hashes). They are pure Python (any platform, any
# Python >= 3.11) and installed without byte-compiling, so two runs of one commit
# produce byte-identical trees (tests/integration/test_packaging.py checks it).
#
#   bash scripts/vendor-libs.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python-for-build.sh

LIBS=${1:-extension/dist/libs}
LOCK=extension/requirements-vsix.txt
# The lock must still say what pyproject.toml asks for.
"$PYTHON" - "$LOCK" <<'PY'
import sys, tomllib
wanted = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
header = [ln[len("#   "):].strip() for ln in open(sys.argv[1]) if ln.startswith("#   ")]
if header != wanted:
    sys.exit(f"vendor-libs: pyproject.toml's dependencies {wanted} differ from the lock's {header}: "
             "run scripts/lock-vsix-deps.sh")
PY
rm -rf "$LIBS"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps \
  --require-hashes --target "$LIBS" --only-binary=:all: --python-version 3.11 --implementation py \
  -r "$LOCK" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }
[ -d "$LIBS/pygls" ] || { echo "vendor-libs: installing $LOCK into $LIBS failed" >&2; exit 1; }
rm -rf "$LIBS/bin"
"$PYTHON" - "$LIBS" <<'PY'
import pathlib, sys
# Refuse a compiled extension module: it would tie the .vsix to one platform.
native = [p for p in pathlib.Path(sys.argv[1]).rglob("*") if p.suffix in (".so", ".pyd", ".dylib")]
sys.exit(f"native modules in {sys.argv[1]}: {native}" if native else 0)
PY
