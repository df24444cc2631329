#!/usr/bin/env bash
# Build the installable extension: out/trainium-lens-<version>.vsix.
#
# It carries the server's Python sources and its pure-Python dependencies
# (pygls, lsprotocol, cattrs, attrs, ...) vendored from PyPI into
# extension/dist/libs, pinned with hashes in extension/requirements-vsix.txt, so it
# works right after install without pip. torch is not bundled: local profiling
# uses the interpreter's own torch.
set -euo pipefail
cd "$(dirname "$0")/.."

# A fresh clone needs only Node and a Python 3.11+ with pip (or scripts/setup.sh's .venv).
source scripts/python-for-build.sh
[ -d node_modules/@vscode/vsce ] || npm ci --no-audit --no-fund

# The server's libraries, exactly as extension/requirements-vsix.txt pins them
# (scripts/vendor-libs.sh); vendored again only when the lock changed.
LIBS=extension/dist/libs
STAMP="$LIBS/.lock-sha256"
lock_hash=$(sha256sum extension/requirements-vsix.txt | cut -d" " -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$lock_hash" ]; then
  PYTHON=$PYTHON bash scripts/vendor-libs.sh "$LIBS"
  echo "$lock_hash" >"$STAMP"
fi

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
  printf '%s\n' package.json README.md CHANGELOG.md LICENSE .vscodeignore
  find extension/dist/extension.js extension/dist/panel.js extension/src/python/launch.py \
    extension/src/panel/panel.css extension/media extension/dist/libs server/trainium_lens docs/images \
    -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*.d.ts' ! -name tsconfig.json \
    ! -name .lock-sha256 2>/dev/null || true
)
# The staged manifest has no build scripts to run: the bundle is already built.
node -e '
const fs = require("fs"), file = process.argv[1];
const p = JSON.parse(fs.readFileSync(file, "utf8"));
delete p.scripts; delete p.devDependencies;
fs.writeFileSync(file, JSON.stringify(p, null, 2));' "$STAGE/package.json"
mkdir -p out
(cd "$STAGE" && "$OLDPWD/node_modules/.bin/vsce" package --no-dependencies \
  --allow-missing-repository --no-rewrite-relative-links --out "$OLDPWD/out/trainium-lens-$VERSION.vsix" >&2)
echo "out/trainium-lens-$VERSION.vsix"
