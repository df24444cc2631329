"""What an SSH run runs on the host, as POSIX shell (``target.py`` sends each over its one
connection): prepare the work dir and pick the Python, start the wrapper or the warm
worker, remove stored runs, kill a run's process group. Each takes its values as
positional arguments, never spliced into the script, so no value is shell code."""

from __future__ import annotations

#: The DLAMI's PyTorch venvs (``/opt/aws_neuronx_venv_pytorch_2_9``, ...), newest
#: first, then whatever ``python3`` the login PATH has.
DEFAULT_PYTHONS = "/opt/aws_neuronx_venv_pytorch*/bin/python"
LOCK_WAIT_S = 600
MARK = "trainium-lens-remote: "

# $1 work dir ("" = the default), $2 python ("" = the default), $3 "1" to print the
# sync manifest, $4 workspace id, $5 the default Pythons' glob, $6 "run" or "probe"
# (probe: exec the Python on the doctor's probe script, which comes on stdin).
PREPARE_SCRIPT = r"""
wd=$1; req=$2
[ -n "$wd" ] || wd="$HOME/.cache/trainium-lens/$4"
case $wd in "~") wd=$HOME;; "~/"*) wd="$HOME/${wd#"~/"}";; esac
mkdir -p "$wd" 2>/dev/null || { echo "trainium-lens-remote: cannot create the work dir $wd" >&2; exit 70; }
wd=$(cd "$wd" && pwd -P) || exit 70
# Existence only (running a Python here would cost a process start on every run);
# a Python too old for the harness says so itself.
ok() { [ -f "$1" ] && [ -x "$1" ]; }
py=
if [ -n "$req" ]; then
  case $req in "~/"*) req="$HOME/${req#"~/"}";; esac
  found=$(command -v -- "$req" 2>/dev/null) || found=
  if [ -z "$found" ]; then
    echo "trainium-lens-remote: the remote Python $req does not exist on the host" >&2; exit 71
  fi
  ok "$found" || {
    echo "trainium-lens-remote: the remote Python $req is not an executable file" >&2; exit 71; }
  py=$found
else
  for c in $(ls -d $5 2>/dev/null </dev/null | sort -r -V 2>/dev/null) python3; do
    found=$(command -v -- "$c" 2>/dev/null) || continue
    if ok "$found"; then py=$found; break; fi
  done
  [ -n "$py" ] || {
    echo "trainium-lens-remote: no Python 3 found on the host (none of the Neuron DLAMI venvs," \
      "no python3 on PATH): pass --remote-python PATH" >&2; exit 71; }
fi
[ "$6" = probe ] && exec "$py" - "$wd"
mkdir -p "$wd/src" "$wd/runs" || exit 70
echo "wd=$wd"
echo "python=$py"
if command -v rsync >/dev/null 2>&1; then echo "rsync=yes"; else echo "rsync=no"; fi
echo "lens=$(cat "$wd/lens/.hash" 2>/dev/null)"
if [ "$3" = 1 ] || ! command -v rsync >/dev/null 2>&1; then
  echo "--manifest--"; cat "$wd/src.manifest.json" 2>/dev/null
fi
exit 0
"""

# -S: the wrapper needs no site-packages (a faster start on every run). --lifeline:
# our ssh's stdin stays open for the run; its end of file stops the run there.
RUN = 'exec "$1" -S "$2/lens/ssh_wrapper.py" "$2" "$3" --lifeline'

# The warm worker (harness/runtime/worker.py): $1 python, $2 work dir, $3 idle seconds. It
# ends when this channel closes (its stdin), so it never outlives the client.
WARM = (
    'cd "$2" && PYTHONPATH="$2/lens${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 '
    'exec "$1" -m trainium_lens.harness.runtime.worker --idle "$3"'
)

# $1 work dir, then batch ids (checked here too): remove <work dir>/runs/<id>.
REMOVE_RUNS = r"""
wd=$1; shift
for id in "$@"; do
  case $id in ""|.*|*/*|*..*) continue;; esac
  [ -L "$wd/runs/$id" ] && { rm -f -- "$wd/runs/$id"; continue; }
  rm -rf -- "$wd/runs/$id"
done
exit 0
"""

# $1 work dir ("" = the default), $2 workspace id, $3 the parent folder, $4 the name:
# tar the artifact, only when it lies in a run folder of this workspace's work dir
# (links resolved here, on the host: the path comes from a stored result).
FETCH = r"""
wd=$1
[ -n "$wd" ] || wd="$HOME/.cache/trainium-lens/$2"
case $wd in "~") wd=$HOME;; "~/"*) wd="$HOME/${wd#"~/"}";; esac
runs=$(cd -- "$wd/runs" 2>/dev/null && pwd -P) || {
  echo "trainium-lens-remote: no run folders of this workspace on the host" >&2; exit 73; }
parent=$(cd -- "$3" 2>/dev/null && pwd -P) || { echo "trainium-lens-remote: No such file: $3" >&2; exit 74; }
case "$parent/$4" in
  "$runs"/?*) [ ! -L "$parent/$4" ] || {
    echo "trainium-lens-remote: $3/$4 is a link, not in a run folder of this workspace on the host" >&2
    exit 73; };;
  *) echo "trainium-lens-remote: $3/$4 is not in a run folder of this workspace on the host" >&2; exit 73;;
esac
[ -e "$parent/$4" ] || [ -L "$parent/$4" ] || {
  echo "trainium-lens-remote: No such file: $3/$4" >&2; exit 74; }
cd -- "$parent" && exec tar -cf - -- "$4"
"""

# $1 pgid, $2 wrapper pid: TERM both, wait for the group, then KILL what is left.
KILL = r"""
kill -TERM -- "-$1" "$2" 2>/dev/null
i=0
while kill -0 -- "-$1" 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done
kill -KILL -- "-$1" 2>/dev/null
exit 0
"""
