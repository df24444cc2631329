#!/usr/bin/env bash
# Rewrite what scripts/check.sh's format checks would reject: `ruff format` and
# ruff's import order over the Python tree, `prettier --write` over TS/JS/CSS/HTML/
# JSON (what .prettierignore leaves in). With FILES, only those (each by its kind).
#   bash scripts/fmt.sh                 everything
#   bash scripts/fmt.sh FILE...         the files named (e.g. what you touched)
set -euo pipefail
cd "$(dirname "$0")/.."

py=() other=()
for f in "$@"; do
  case $f in
    *.py) py+=("$f") ;;
    *) other+=("$f") ;;
  esac
done
if (($# == 0)); then py=(.) other=(.); fi
if ((${#py[@]})); then
  .venv/bin/ruff check --quiet --force-exclude --select I --fix "${py[@]}"
  .venv/bin/ruff format --quiet --force-exclude "${py[@]}"
fi
if ((${#other[@]})); then
  node_modules/.bin/prettier --write --log-level warn --ignore-unknown "${other[@]}"
fi
