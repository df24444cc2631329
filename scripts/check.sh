#!/usr/bin/env bash
# Every static check, the one entry (scripts/test.sh runs it; CI fails on any finding):
#   ruff          lint rules E,F,W,I,B,UP over the Python tree (pyproject.toml [tool.ruff])
#   ruff-format   the Python tree is as `ruff format` leaves it
#   mypy          server/ and tests/: check_untyped_defs, disallow_untyped_defs outside
#                 the harness (pyproject.toml [tool.mypy])
#   tsc           strict, over the extension (tsconfig.json)
#   tsc-media     checkJs over the timeline's plain JS (extension/media/tsconfig.json)
#   eslint        typescript-eslint's type-aware rules (eslint.config.mjs)
#   prettier      TS/JS/CSS/HTML/JSON are as `prettier` leaves them (.prettierrc.json)
#   layers        the import contracts (pyproject.toml [tool.importlinter]): the harness
#                 imports only stdlib + torch + itself, the core only its contract
#                 modules, the engine no concrete target, the core's layers one way,
#                 commands and LSP features independent
#   circles       no import circle in the package or the extension (scripts/circles.py)
#   privates      no module of the package imports another module's private `_name`
#                 (scripts/privates.py)
# `bash scripts/check.sh` runs them all, even after a failure, so one run lists every
# finding; `bash scripts/check.sh mypy layers` runs the ones named. scripts/fmt.sh
# rewrites what ruff-format and prettier would reject.
# Needs .venv (scripts/setup.sh) and node_modules (npm ci).
set -uo pipefail
cd "$(dirname "$0")/.."

ALL=(ruff ruff-format mypy tsc tsc-media eslint prettier layers circles privates)
[ -x .venv/bin/ruff ] && [ -x .venv/bin/mypy ] && [ -x .venv/bin/lint-imports ] || {
  echo "check: run scripts/setup.sh first (no .venv/bin/ruff, mypy or lint-imports)" >&2
  exit 2
}
[ -x node_modules/.bin/tsc ] && [ -x node_modules/.bin/eslint ] && [ -x node_modules/.bin/prettier ] || {
  echo "check: run 'npm ci' first (no tsc, eslint or prettier in node_modules)" >&2
  exit 2
}

run_one() {
  case $1 in
    ruff) .venv/bin/ruff check --quiet . ;;
    ruff-format) .venv/bin/ruff format --check --quiet . ;;
    # the cache per machine, shared by every checkout (a fresh clone's first mypy is
    # 46 s, an incremental one 1 s; mypy re-checks a module whose file's hash changed);
    # one mypy at a time writes it
    mypy) (
      cache=${MYPY_CACHE_DIR:-$HOME/.cache/trainium-lens/mypy}
      mkdir -p "$cache" && exec 9>"$cache.lock" && flock 9
      MYPY_CACHE_DIR=$cache .venv/bin/mypy --no-error-summary
    ) ;;
    tsc) node_modules/.bin/tsc -p tsconfig.json --noEmit ;;
    tsc-media) node_modules/.bin/tsc -p extension/media/tsconfig.json --noEmit ;;
    eslint) node_modules/.bin/eslint --max-warnings 0 extension/src extension/test ;;
    prettier) node_modules/.bin/prettier --check --log-level warn . ;;
    layers)
      # This tree's package (not the one installed in .venv, which may be another
      # checkout's); quiet unless a contract is broken.
      local out
      out=$(PYTHONPATH=server .venv/bin/lint-imports --no-cache --no-logo 2>&1) || {
        printf '%s\n' "$out"
        return 1
      }
      ;;
    circles) .venv/bin/python scripts/circles.py . ;;
    privates) .venv/bin/python scripts/privates.py . ;;
    *)
      echo "check: no check named '$1' (${ALL[*]})" >&2
      return 2
      ;;
  esac
}

names=("$@")
((${#names[@]})) || names=("${ALL[@]}")
failed=()
for name in "${names[@]}"; do
  run_one "$name" || failed+=("$name")
done
if ((${#failed[@]})); then
  echo "check: failed: ${failed[*]}" >&2
  exit 1
fi
echo "check: ${names[*]} clean" >&2
