#!/usr/bin/env bash
# Pin the Python libraries the .vsix carries (extension/requirements-vsix.txt):
# pyproject.toml's runtime dependencies resolved for the oldest Python the server
# supports, wheels only, each with its sha256. scripts/package-vsix.sh installs
# exactly these (pip --require-hashes), so two builds ship the same bytes.
# Run after changing [project] dependencies, and commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python-for-build.sh

mapfile -t REQS < <("$PYTHON" -c '
import tomllib
for req in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    print(req)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m pip download --quiet --disable-pip-version-check --dest "$tmp" \
  --only-binary=:all: --python-version 3.11 --implementation py "${REQS[@]}" 2>&1 |
  { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }
"$PYTHON" - "$tmp" "${REQS[@]}" >extension/requirements-vsix.txt <<'PY'
import hashlib, pathlib, sys
folder, reqs = pathlib.Path(sys.argv[1]), sys.argv[2:]
print("# The .vsix's vendored Python libraries, pinned with their hashes.")
print("# Made by scripts/lock-vsix-deps.sh from pyproject.toml's dependencies:")
for req in reqs:
    print(f"#   {req}")
print("# Do not edit: re-run the script (scripts/package-vsix.sh installs these with --require-hashes).")
for wheel in sorted(folder.glob("*.whl"), key=lambda p: p.name.lower()):
    name, version = wheel.name.split("-")[:2]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    print(f"{name.replace('_', '-').lower()}=={version} \\\n    --hash=sha256:{digest}")
PY
echo "lock-vsix-deps: wrote extension/requirements-vsix.txt" >&2
