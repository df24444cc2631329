#!/usr/bin/env bash
# The static checks (scripts/test.sh runs them first; CI fails on any finding):
#   ruff (rules E,F,W,I,B,UP) and mypy (check_untyped_defs) over server/ and tests/,
#     configured in pyproject.toml;
#   tsc (strict) over the extension, and checkJs over the timeline's plain JS
#     (extension/media/tsconfig.json);
#   ESLint (eslint.config.mjs, typescript-eslint) over the extension's TypeScript.
# Every check runs even when an earlier one fails, so one run lists every finding.
# Needs .venv (scripts/setup.sh) and node_modules (npm ci).
set -uo pipefail
cd "$(dirname "$0")/.."

[ -x .venv/bin/ruff ] && [ -x .venv/bin/mypy ] || { echo "lint: run scripts/setup.sh first (no .venv/bin/ruff or mypy)" >&2; exit 2; }
[ -x node_modules/.bin/tsc ] && [ -x node_modules/.bin/eslint ] || { echo "lint: run 'npm ci' first (no tsc or eslint in node_modules)" >&2; exit 2; }

failed=()
check() {
  local name=$1; shift
  if ! "$@"; then failed+=("$name"); fi
}
check ruff .venv/bin/ruff check --quiet server tests
check mypy .venv/bin/mypy --no-error-summary
check tsc node_modules/.bin/tsc -p tsconfig.json --noEmit
check tsc-media node_modules/.bin/tsc -p extension/media/tsconfig.json --noEmit
check eslint node_modules/.bin/eslint --max-warnings 0 extension/src extension/test
if ((${#failed[@]})); then
  echo "lint: failed: ${failed[*]}" >&2
  exit 1
fi
echo "lint: ruff, mypy, tsc, tsc-media, eslint clean" >&2
