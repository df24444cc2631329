#!/usr/bin/env bash
# The old name of scripts/check.sh (every static check): kept so habits and
# branches that call it still work.
exec bash "$(dirname "$0")/check.sh" "$@"
