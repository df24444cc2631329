#!/usr/bin/env bash
# Build the installable extension: out/trainium-lens-<version>.vsix.
#
# It carries the server's Python sources and its pure-Python dependencies
# (pygls, lsprotocol, cattrs, attrs, ...) vendored from PyPI into
# extension/dist/libs, so it works right after install without pip. torch is not
# bundled: local profiling uses the interpreter's own torch.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
[ -d node_modules/@vscode/vsce ] || npm ci --no-audit --no-fund

# The server's runtime requirements, exactly as pyproject.toml states them.
mapfile -t REQS < <("$PYTHON" -c '
import tomllib
for req in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    print(req)')

LIBS=extension/dist/libs
STAMP="$LIBS/.requirements"
# Vendored again only when the requirements changed.
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "${REQS[*]}" ]; then
  rm -rf "$LIBS"
  # Resolved for the oldest Python the server supports, wheels only: every one of
  # them is pure Python, so the result works on any platform and newer Pythons.
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-compile \
    --target "$LIBS" --only-binary=:all: --python-version 3.11 --implementation py \
    "${REQS[@]}" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  [ -d "$LIBS/pygls" ] || { echo "package-vsix: vendoring ${REQS[*]} failed" >&2; exit 1; }
  rm -rf "$LIBS/bin"
  echo "${REQS[*]}" >"$STAMP"
fi
"$PYTHON" - "$LIBS" <<'PY'
import pathlib, sys
# Refuse a compiled extension module: it would tie the .vsix to one platform.
native = [p for p in pathlib.Path(sys.argv[1]).rglob("*") if p.suffix in (".so", ".pyd", ".dylib")]
sys.exit(f"native modules in {sys.argv[1]}: {native}" if native else 0)
PY

VERSION=$(node -p 'require("./package.json").version')
node scripts/build-extension.mjs --production

# vsce walks every file under the folder it packages before applying
# .vscodeignore (here: .venv with torch, .e2e with code-server), so package a
# staged copy of exactly what ships.
STAGE=out/vsix-stage
rm -rf "$STAGE" && mkdir -p "$STAGE"
while IFS= read -r path; do
  mkdir -p "$STAGE/$(dirname "$path")" && cp "$path" "$STAGE/$path"
done < <(
  ls package.json README.md LICENSE .vscodeignore 2>/dev/null || true  # those that exist
  find extension/dist/extension.js extension/dist/panel.js extension/src/python/launch.py \
    extension/src/panel/panel.css extension/media extension/dist/libs server/trainium_lens docs/images \
    -type f ! -path '*/__pycache__/*' ! -name '*.pyc' 2>/dev/null || true
)
# The staged manifest has no build scripts to run: the bundle is already built.
node -e '
const fs = require("fs"), file = process.argv[1];
const p = JSON.parse(fs.readFileSync(file, "utf8"));
delete p.scripts; delete p.devDependencies;
fs.writeFileSync(file, JSON.stringify(p, null, 2));' "$STAGE/package.json"
mkdir -p out
(cd "$STAGE" && "$OLDPWD/node_modules/.bin/vsce" package --no-dependencies --skip-license \
  --allow-missing-repository --no-rewrite-relative-links --out "$OLDPWD/out/trainium-lens-$VERSION.vsix" >&2)
echo "out/trainium-lens-$VERSION.vsix"
