#!/usr/bin/env bash
# Set up everything on a fresh machine and run every check (README's test command):
# the static checks (scripts/check.sh), the extension's unit tests, then pytest.
# A check's finding fails the run, after the tests have run too (one run, every finding).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/setup-ssh.sh
bash scripts/setup-e2e.sh
# the torch-xla venv, shared per machine (~7 GB once; scripts/setup-xla.sh)
bash scripts/setup-xla.sh
checks=0
bash scripts/check.sh || checks=$?
npm run --silent test:unit
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
# the harness's own tests again under torch 2.9 (Trn1's stack)
bash scripts/test-xla.sh
if ((checks)); then
  echo "test.sh: the tests passed but the static checks failed (scripts/check.sh)" >&2
  exit "$checks"
fi
