"""The script the service runs on the host (stdlib only): starts Neuron Explorer
for one profile, or finds the one already running, and reports its port."""

from __future__ import annotations

MARK = "trainium-lens-explorer: "


# $1 state dir, $2 API port, $3 binary ("" = default), $4 profile dir, $5 display
# name, $6 seconds to wait for the server, $7 the source root on the host ("" =
# none: --framework-source-root), $8 $9 a NEFF and its NTFF (xla on Trn1: a
# device profile ingested with -n/-s; "" = the profile dir with -d). Prints
# key=value lines.
HOST_SCRIPT = r"""
state=$1; api=$2; exe=$3; dir=$4; name=$5; wait_s=$6; src=$7; neff=$8; ntff=$9
[ -n "$state" ] || state=$HOME/.cache/trainium-lens/explorer
say() { echo "trainium-lens-explorer: $*" >&2; }
if [ -z "$exe" ]; then
  exe=$(command -v neuron-explorer 2>/dev/null) || exe=/opt/aws/neuron/bin/neuron-explorer
fi
if [ ! -x "$exe" ]; then
  say "neuron-explorer is not installed on this host (not on PATH, not $exe):" \
    "install aws-neuronx-tools, or set the Explorer binary path"
  exit 72
fi
mkdir -p "$state" || { say "cannot create $state"; exit 70; }
log=$state/explorer.log
probe() {
  if command -v bash >/dev/null 2>&1; then
    bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
  else
    python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2)' \
      "$1" 2>/dev/null
  fi
}
echo "exe=$exe"
if probe "$api"; then
  echo "server=running"
else
  echo "--- $(date -u +%FT%TZ) starting $exe view" >>"$log"
  # Detached: its own session, no terminal, output to the log, so it outlives
  # this SSH session and serves every later run.
  if command -v setsid >/dev/null 2>&1; then
    setsid nohup "$exe" view >>"$log" 2>&1 </dev/null &
  else
    nohup "$exe" view >>"$log" 2>&1 </dev/null &
  fi
  i=0
  until probe "$api"; do
    i=$((i+1))
    if [ $i -gt $((wait_s*10)) ]; then
      say "neuron-explorer view did not answer on port $api within ${wait_s}s;" \
        "its log $log ends with: $(tail -n 3 "$log" | tr '\n' ' ')"
      exit 73
    fi
    sleep 0.1
  done
  echo "server=started"
fi
if [ -n "$dir" ]; then
  if grep -Fxq -- "$name" "$state/ingested" 2>/dev/null; then
    echo "ingest=done-before"
  else
    if [ -n "$neff" ] && [ -n "$ntff" ]; then
      for f in "$neff" "$ntff"; do
        [ -f "$f" ] || { say "the run's device profile file is gone: $f"; exit 74; }
      done
      set -- -n "$neff" -s "$ntff"
    else
      [ -d "$dir" ] || { say "the run's Neuron profile directory is gone: $dir"; exit 74; }
      # NeuronProfiler writes <dir>/<instance-id>_pid_<pid>/[<timestamp>/]; a system
      # profile is the folder holding trace_info.pb (docs/explorer.md).
      if [ ! -f "$dir/trace_info.pb" ]; then
        found=$(find "$dir" -name trace_info.pb -print 2>/dev/null | head -n 1)
        [ -n "$found" ] && dir=$(dirname "$found")
      fi
      set -- -d "$dir"
    fi
    # Explorer's source view reads the profiled code where it ran (the synced workspace)
    [ -n "$src" ] && set -- "$@" --framework-source-root "$src"
    echo "--- $(date -u +%FT%TZ) ingesting $* as $name" >>"$log"
    if "$exe" view "$@" --ingest-only --display-name "$name" >>"$log" 2>&1; then
      echo "$name" >>"$state/ingested"
      echo "ingest=now"
    else
      say "neuron-explorer could not ingest $*; its log $log ends with: $(tail -n 3 "$log" | tr '\n' ' ')"
      exit 75
    fi
  fi
fi
"""
