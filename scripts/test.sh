#!/usr/bin/env bash
# Set up everything on a fresh machine and run every test (README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
for extra in scripts/setup-ssh.sh scripts/setup-e2e.sh; do
  [ -f "$extra" ] && bash "$extra"
done
if [ -f package.json ]; then
  npm run --silent test:unit
fi
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
