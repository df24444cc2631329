#!/usr/bin/env bash
# The harness under torch 2.9 + torch-xla 2.9 (what Trn1 hosts run): its own
# tests in .venv-xla (training steps' backward attribution included; the editor
# tests of integration/harness/test_training.py need the language server's libraries, not here).
# The xla backend's end-to-end tests (tests/integration/harness/test_xla_backend.py) run in the main
# suite, driving .venv-xla/bin/python as the target's Python. The `serial` tests (a
# timing-based finding, withheld on a loaded machine) run in the main suite's quiet
# step only: this script runs beside the editor's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-xla.sh
# The venv is shared by every clone on the machine: PYTHONPATH makes sure this
# checkout's package is the one tested, whichever clone installed it last.
PYTHONPATH="$PWD/server${PYTHONPATH:+:$PYTHONPATH}" .venv-xla/bin/python -m pytest -q -p no:cacheprovider -W ignore::pytest.PytestConfigWarning \
  tests/integration/harness/test_attribution.py tests/integration/harness/test_lines.py tests/unit/harness/test_contract_and_backends.py \
  tests/integration/harness/test_errors.py tests/integration/harness/test_rmsnorm.py tests/unit/harness/xla/ \
  tests/integration/harness/test_xla_device.py::test_harness_pairs_by_the_runtime_hash_and_runs_the_view_per_pair \
  tests/integration/harness/test_xla_device.py::test_harness_view_failures_are_one_line_each \
  tests/integration/harness/test_training.py -m "not serial" \
  --deselect tests/integration/harness/test_training.py::test_hint_shows_forward_and_backward \
  --deselect tests/integration/harness/test_training.py::test_a_schema_1_result_still_opens \
  --deselect tests/integration/harness/test_training.py::test_hover_lists_backward_ops_apart_from_forward_ops "$@"
