#!/usr/bin/env bash
# Set up everything on a fresh machine and run every check (README's test command):
# the static checks (scripts/check.sh), the extension's unit tests, then pytest:
# first the independent tests in parallel (pytest-xdist, one worker per core, each
# test file on one worker so its module fixtures run once, the lab's tests on one
# worker in order), then the `serial` ones (timing- and noise-sensitive tests, the
# editor's) alone, then the harness's tests under
# torch-xla. A check's finding fails the run, after the tests have run too (one run,
# every finding). Every step's wall time is printed at the end, pass or fail.
# Extra arguments go to both pytest runs (e.g. -x, -k); TEST_WORKERS sets the workers.
set -euo pipefail
cd "$(dirname "$0")/.."

steps=()
failed=0
started=$(date +%s)
step() { # step NAME COMMAND...: run it, note its wall time and status
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  ((rc == 0)) || failed=$rc
  steps+=("$(printf '%-26s %4ds  %s' "$name" $(($(date +%s) - t0)) "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")")")
  return "$rc"
}
summary() {
  local rc=$?
  ((rc)) || rc=$failed
  # a step that failed before the torch-xla install ended: let it end (a venv cut
  # off mid-install is installed again next time, but nothing is left running)
  if [ -n "${xla_log:-}" ] && [ -f "$xla_log" ]; then wait 2>/dev/null || true; fi
  echo
  echo "test.sh: wall time per step"
  for s in "${steps[@]}"; do echo "  $s"; done
  printf '  %-26s %4ds  %s\n' total $(($(date +%s) - started)) "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")"
}
trap summary EXIT

# The torch-xla venv (~7 GB once per machine, ~4 min: scripts/setup-xla.sh) installs
# beside the other set-up steps and the static checks (mostly unpacking, while
# code-server's native build and the checks use the CPU); pytest waits for it. Its
# output is printed when it ends.
xla_log=$(mktemp)
(
  t0=$(date +%s) rc=0
  bash scripts/setup-xla.sh >"$xla_log" 2>&1 || rc=$?
  echo "$rc $(($(date +%s) - t0))" >"$xla_log.done"
) &
xla_pid=$!
xla_wait() {
  local rc secs
  wait "$xla_pid" || true
  cat "$xla_log"
  read -r rc secs <"$xla_log.done" || { rc=1 secs=0; }
  rm -f "$xla_log" "$xla_log.done"
  ((rc == 0)) || failed=$rc
  steps+=("$(printf '%-26s %4ds  %s' "setup-xla.sh (beside)" "$secs" "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")")")
  return "$rc"
}

step setup.sh bash scripts/setup.sh
step setup-ssh.sh bash scripts/setup-ssh.sh
step setup-e2e.sh bash scripts/setup-e2e.sh
checks=0
step check.sh bash scripts/check.sh || checks=$?
step "npm test:unit" npm run --silent test:unit
# the machine's CPU roof, measured while nothing else runs, for every test's runs to
# share (tests/conftest.py, TEST_ROOF): one thread, as the tests (and the SSH tests'
# remote sessions) run torch, and every core, as a process that sets no thread count
# does (the lab's nodes)
roof() {
  local threads
  for threads in 1 "$(nproc)"; do
    OMP_NUM_THREADS=$threads TRAINIUM_LENS_ROOF="$PWD/.cache/tests/cpu-roof.json" .venv/bin/python -c \
      'import torch; from trainium_lens.harness.work.calibrate import cpu_roof; print(cpu_roof(torch)["device"])'
  done
}
xla_wait
step "cpu roof" roof
# --durations: wall time per test; tests.support.cpu_time: CPU per test file (the
# worker's and its reaped children's), what a test costs the 2 cores the suite shares
CPU_LOG=.cache/tests/cpu-time.jsonl
mkdir -p .cache/tests && rm -f "$CPU_LOG"
PYTEST=(env TEST_CPU_LOG="$PWD/$CPU_LOG" .venv/bin/python -m pytest -q -p no:cacheprovider --durations=40
  -p tests.support.cpu_time)
tests=0
# One worker more than cores: the lab's worker mostly waits (on nodes, SLURM, timeouts).
step "pytest (parallel)" "${PYTEST[@]}" -n "${TEST_WORKERS:-$(($(nproc) + 1))}" --dist loadgroup -m "not serial" "$@" || tests=$?
if [ -f "$CPU_LOG" ]; then .venv/bin/python -m tests.support.cpu_time "$CPU_LOG" --top 15 || true; fi
# exit status 5: no test was selected (e.g. -k matched only parallel tests)
step "pytest (serial)" "${PYTEST[@]}" -p no:xdist -m serial "$@" || { rc=$?; ((rc == 5)) || tests=$rc; }
# the harness's own tests again under torch 2.9 (Trn1's stack)
step test-xla.sh bash scripts/test-xla.sh
if ((tests)); then
  exit "$tests"
fi
if ((checks)); then
  echo "test.sh: the tests passed but the static checks failed (scripts/check.sh)" >&2
  exit "$checks"
fi
