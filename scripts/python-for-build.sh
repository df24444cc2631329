# Sourced by the packaging scripts: $PYTHON, a Python 3.11+ with pip to resolve
# and vendor the server's libraries. The project's .venv (scripts/setup.sh) when
# there is one, else python3 from PATH; the caller's $PYTHON wins.
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if ! "$PYTHON" -c 'import sys, pip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "$(basename "$0"): needs a Python 3.11+ with pip ($PYTHON is not one): run scripts/setup.sh first" >&2
  exit 1
fi
