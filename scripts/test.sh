#!/usr/bin/env bash
# Set up everything on a fresh machine and run every test (README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
for extra in scripts/setup-ssh.sh scripts/setup-e2e.sh; do
  [ -f "$extra" ] && bash "$extra"
done
# -- xla (issue 11): the torch-xla venv, shared per machine (~7 GB once) ---------
if [ -f scripts/setup-xla.sh ]; then bash scripts/setup-xla.sh; fi
# ---------------------------------------------------------------------------------
if [ -f package.json ]; then
  npm run --silent test:unit
fi
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
# -- xla (issue 11): the harness's own tests again under torch 2.9 (Trn1's stack) --
if [ -f scripts/test-xla.sh ]; then bash scripts/test-xla.sh; fi
