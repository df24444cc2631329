#!/usr/bin/env bash
# The Python side: a venv with the pinned CPU torch and the package in edit mode.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import torch, pygls' # fail loudly if the install did not take
