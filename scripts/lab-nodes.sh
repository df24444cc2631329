#!/usr/bin/env bash
# A real two-node cluster on this one machine, for tests and CI (docs/lab.md):
# three network namespaces (login = SLURM controller + login host, node1, node2)
# on a bridge of their own, one sshd and one host name per host, a private home
# per host, munge, slurmctld and one slurmd per node.
#
#   scripts/lab-nodes.sh up      # builds it (idempotent); last line: the ssh config path
#   scripts/lab-nodes.sh down    # removes everything it made (idempotent)
#   scripts/lab-nodes.sh status  # what is up
#
# Root only (namespaces, bridge, daemons as root). All state lives under LAB_DIR.
set -euo pipefail

LAB_DIR=${LAB_DIR:-$HOME/.cache/trainium-lens/lab}
# A /24 that exists only inside the lab namespaces: no namespace has a default
# route and the bridge has no address, so nothing sent to it can leave.
LAB_NET=${LAB_NET:-10.231.77}
HOSTS=(login node1 node2)
declare -A ADDR=([login]=$LAB_NET.10 [node1]=$LAB_NET.11 [node2]=$LAB_NET.12)
BRIDGE=tlens-br0
IFNAME=lab0           # the lab interface's name inside every namespace (GLOO_SOCKET_IFNAME)
NS_PREFIX=tlens-      # network namespace names: tlens-login, tlens-node1, tlens-node2
WAIT_S=${LAB_WAIT_S:-60}  # a deadline, not a wait: the lab is up in ~1 s on an idle machine
# Folders of the real home every host still sees (relative to $HOME; see hostinit.sh).
SHARED_HOME=${LAB_SHARED_HOME:-.cache .pyenv .cargo .rustup .local/bin .local/lib .local/share/uv}

log() { echo "lab-nodes: $*" >&2; }
die() { log "error: $*"; exit 1; }
ns() { echo "$NS_PREFIX$1"; }
veth() { echo "tlv-$1"; }  # root-side end (15-char limit on link names)

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (namespaces, a bridge, daemons)"; }

install_packages() {
  local need=()
  command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
  command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
  command -v sinfo >/dev/null 2>&1 || need+=(slurm-client)
  command -v munged >/dev/null 2>&1 || need+=(munge)
  [ -x /usr/sbin/sshd ] || need+=(openssh-server)
  command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  # The ssh client runs in the root namespace, which is not on the lab net: its
  # ProxyCommand runs nc inside the login namespace (see write_ssh_config).
  command -v nc >/dev/null 2>&1 || need+=(netcat-openbsd)
  [ ${#need[@]} -eq 0 ] && return
  log "installing ${need[*]}"
  bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" "${need[@]}"
}

# --- processes --------------------------------------------------------------

# Every process whose network namespace is one of the lab's (the daemons, their
# jobs, ssh sessions, the ProxyCommand's nc).
lab_pids() {
  local inodes=() h ino pid link
  for h in "${HOSTS[@]}"; do
    ino=$(stat -L -c %i "/run/netns/$(ns "$h")" 2>/dev/null) || continue
    inodes+=("net:[$ino]")
  done
  [ ${#inodes[@]} -eq 0 ] && return 0
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    link=$(readlink "/proc/$pid/ns/net" 2>/dev/null) || continue
    for ino in "${inodes[@]}"; do
      if [ "$link" = "$ino" ]; then echo "$pid"; break; fi
    done
  done
}

# Only processes found in a lab namespace are killed, never a pid read from a
# pid file: a daemon a test killed (a node made to die) leaves its pid file, and
# once pids wrap that number is some other process of this machine's (CI saw a
# test's helpers killed during a lab teardown). Every lab process runs inside one
# of the namespaces (the holders enter theirs before they exec).
kill_all() {
  local pids=() pid i
  mapfile -t pids < <(lab_pids | sort -u | grep -v '^$' || true)
  [ ${#pids[@]} -eq 0 ] && return 0
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for i in $(seq 1 40); do  # 2 s for a clean exit, then SIGKILL
    local alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ ${#alive[@]} -eq 0 ] && break
    sleep 0.05
    [ "$i" = 40 ] && for pid in "${alive[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  done
  # Anything still in a lab namespace (started while we were killing) goes now.
  mapfile -t pids < <(lab_pids)
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  sleep 0.1
  return 0
}

# --- down -------------------------------------------------------------------

do_down() {
  need_root
  kill_all
  local h
  for h in "${HOSTS[@]}"; do
    ip netns del "$(ns "$h")" 2>/dev/null || true
    ip link del "$(veth "$h")" 2>/dev/null || true
    rm -rf "/etc/netns/$(ns "$h")"
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  if [ -f "$LAB_DIR/run/etc-netns.ours" ]; then
    rmdir /etc/netns 2>/dev/null || true
    rm -f "$LAB_DIR/run/etc-netns.ours"
  fi
  # `ip netns add` makes /run/netns a mount point of its own; undo that only if
  # the lab's up was what made it and no other namespace lives there now.
  if [ -f "$LAB_DIR/run/netns-mount.ours" ]; then
    if [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then umount /run/netns 2>/dev/null || true; fi
    rm -f "$LAB_DIR/run/netns-mount.ours"
  fi
  rm -f "$LAB_DIR"/run/*.pid "$LAB_DIR/munge/munge.socket.2"*
  local left
  left=$(lab_pids | wc -l)
  [ "$left" = 0 ] || die "$left processes are still in lab namespaces"
}

# --- up ---------------------------------------------------------------------

write_files() {
  local d=$LAB_DIR h
  mkdir -p "$d"/{run,log,etc-slurm,ssh,hosts,homes,state,spool,munge}
  chmod 0755 "$d" "$d/munge"  # munged insists: its socket's folder must be 0755
  chmod 0700 "$d/ssh"

  # Lab key (ed25519) and per-host host keys: made once, kept across up/down.
  [ -f "$d/ssh/id_ed25519" ] || ssh-keygen -q -t ed25519 -N "" -C trainium-lens-lab -f "$d/ssh/id_ed25519"
  cp "$d/ssh/id_ed25519.pub" "$d/ssh/authorized_keys"
  chmod 0600 "$d/ssh/authorized_keys"
  : >"$d/ssh/known_hosts"
  for h in "${HOSTS[@]}"; do
    mkdir -p "$d/hosts/$h"
    [ -f "$d/hosts/$h/ssh_host_ed25519_key" ] ||
      ssh-keygen -q -t ed25519 -N "" -C "$h" -f "$d/hosts/$h/ssh_host_ed25519_key"
    # known_hosts from the hosts' real keys, by name and by address, so both the
    # root-namespace client and a client inside a namespace check them.
    echo "$h,${ADDR[$h]} $(cut -d' ' -f1,2 "$d/hosts/$h/ssh_host_ed25519_key.pub")" >>"$d/ssh/known_hosts"
    cat >"$d/hosts/$h/sshd_config" <<EOF
ListenAddress ${ADDR[$h]}
Port 22
HostKey $d/hosts/$h/ssh_host_ed25519_key
PidFile $d/run/sshd-$h.pid
AuthorizedKeysFile $d/ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitUserEnvironment no
UsePAM no
X11Forwarding no
StrictModes yes
MaxStartups 64
MaxSessions 64
Subsystem sftp internal-sftp
EOF
    # The hosts file every namespace sees as /etc/hosts (bound in its mount
    # namespace; /etc/netns/<ns>/hosts is what \`ip netns exec\` binds too).
    [ -d /etc/netns ] || : >"$d/run/etc-netns.ours"
    mkdir -p "/etc/netns/$(ns "$h")"
    {
      echo "127.0.0.1 localhost"
      local o
      for o in "${HOSTS[@]}"; do echo "${ADDR[$o]} $o"; done
    } >"/etc/netns/$(ns "$h")/hosts"
  done
  chmod 0644 "$d/ssh/known_hosts"

  # Munge key of the lab's own (never the machine's /etc/munge/munge.key).
  if [ ! -f "$d/munge/munge.key" ]; then
    dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none
  fi
  chmod 0600 "$d/munge/munge.key"

  # slurm.conf: seen as /etc/slurm/slurm.conf on every lab host (a bind in its
  # mount namespace), so srun/sbatch over ssh need no SLURM_CONF in the env.
  cat >"$d/etc-slurm/slurm.conf" <<EOF
ClusterName=lab
SlurmctldHost=login(${ADDR[login]})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.socket.2
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MinJobAge=5
InactiveLimit=20
MailProg=/bin/true
KillWait=2
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=node1 NodeAddr=${ADDR[node1]} CPUs=$(nproc) State=UNKNOWN
NodeName=node2 NodeAddr=${ADDR[node2]} CPUs=$(nproc) State=UNKNOWN
PartitionName=lab Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP
EOF
  # slurmd does not create its spool dir (%n expanded).
  mkdir -p "$d/spool/node1" "$d/spool/node2"

  # The script each host's holder runs inside its fresh UTS + mount namespace:
  # host name, hosts file, slurm.conf, private home; then it holds the
  # namespaces open (sleep) for the daemons that nsenter them.
  cat >"$d/hostinit.sh" <<'EOF'
#!/bin/bash
set -euo pipefail
h=$1 d=$2 nsname=$3 LAB_SHARED_HOME=$4
hostname "$h"
mount --bind "/etc/netns/$nsname/hosts" /etc/hosts
mkdir -p /etc/slurm
mount --bind "$d/etc-slurm" /etc/slurm
# A private home: a per-host folder over $HOME, so a file one host writes in ~
# is not in another's ~. Only the home is private: the machine's Python, venvs
# and the repository must stay at their paths, and some live in the real home
# (pyenv's interpreters that venvs link to, ~/.cache/trainium-lens's torch-xla
# venv, the pip cache, this lab's own state). Those folders of the real home
# ($LAB_SHARED_HOME) are bound back in, before the home is covered.
home=$d/homes/$h
mkdir -p "$home"
chmod 0700 "$home"
for rel in $LAB_SHARED_HOME; do
  if [ -d "$HOME/$rel" ]; then
    mkdir -p "$home/$rel"
    mount --bind "$HOME/$rel" "$home/$rel"
  fi
done
mount --rbind "$home" "$HOME"
mkdir -p /run/sshd
echo ready
exec sleep infinity
EOF
  chmod 0755 "$d/hostinit.sh"
}

write_ssh_config() {
  local d=$LAB_DIR h
  # The client is the machine's OpenSSH in the root namespace, which has no
  # route to the lab net (and gets none: it stays off it). Each connection's
  # ProxyCommand runs nc inside the login namespace, the way a login host's
  # jump would, so nothing listens in the root namespace for it.
  {
    echo "# Written by scripts/lab-nodes.sh up: the lab's hosts (docs/lab.md)."
    for h in "${HOSTS[@]}"; do
      cat <<EOF
Host $h
  HostName ${ADDR[$h]}
  Port 22
  User root
  IdentityFile $d/ssh/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $d/ssh/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
  BatchMode yes
  ConnectTimeout 5
  ProxyCommand nsenter --net=/run/netns/$(ns login) nc %h %p
EOF
    done
  } >"$d/ssh_config"
  chmod 0644 "$d/ssh_config"
}

build_net() {
  mountpoint -q /run/netns 2>/dev/null || : >"$LAB_DIR/run/netns-mount.ours"
  ip link add "$BRIDGE" type bridge
  # No IPv6 link-local either: the root namespace stays off the lab link.
  sysctl -qw "net.ipv6.conf.$BRIDGE.disable_ipv6=1" 2>/dev/null || true
  ip link set "$BRIDGE" up
  local h n
  for h in "${HOSTS[@]}"; do
    n=$(ns "$h")
    ip netns add "$n"
    ip link add "$(veth "$h")" type veth peer name "$IFNAME" netns "$n"
    sysctl -qw "net.ipv6.conf.$(veth "$h").disable_ipv6=1" 2>/dev/null || true
    ip link set "$(veth "$h")" master "$BRIDGE" up
    ip -n "$n" addr add "${ADDR[$h]}/24" dev "$IFNAME"
    ip -n "$n" link set "$IFNAME" up
    ip -n "$n" link set lo up
  done
}

# Run a command in host $1's namespaces (network, UTS = host name, mount = its
# hosts file, slurm.conf and home).
in_host() {
  local h=$1; shift
  local pid
  pid=$(cat "$LAB_DIR/run/holder-$h.pid")
  nsenter --target "$pid" --net --uts --mount -- "$@"
}

start_hosts() {
  local d=$LAB_DIR h
  for h in "${HOSTS[@]}"; do
    # nsenter, not `ip netns exec`: that remounts /sys, hiding the host's
    # cgroups, and slurmd 22.05 dies without them.
    nsenter --net="/run/netns/$(ns "$h")" unshare --uts --mount --propagation private \
      "$d/hostinit.sh" "$h" "$d" "$(ns "$h")" "$SHARED_HOME" >"$d/log/holder-$h.log" 2>&1 </dev/null &
    echo $! >"$d/run/holder-$h.pid"
  done
  local deadline=$((SECONDS + WAIT_S))
  for h in "${HOSTS[@]}"; do
    # about 0.1 s on an idle machine; seconds when other tests keep the cores busy
    until grep -q ready "$d/log/holder-$h.log" 2>/dev/null; do
      kill -0 "$(cat "$d/run/holder-$h.pid")" 2>/dev/null ||
        fail "host $h's namespace setup failed: $(tail -n3 "$d/log/holder-$h.log")"
      [ $SECONDS -lt $deadline ] || fail "host $h's namespace setup did not finish within ${WAIT_S}s"
      sleep 0.02
    done
  done

  # munged in login; its socket is a path, which every namespace reaches.
  in_host login munged --socket="$d/munge/munge.socket.2" --key-file="$d/munge/munge.key" \
    --pid-file="$d/run/munged.pid" --log-file="$d/log/munged.log" --seed-file="$d/munge/munge.seed" \
    --force </dev/null || fail "munged did not start (see $d/log/munged.log)"

  for h in "${HOSTS[@]}"; do
    in_host "$h" /usr/sbin/sshd -f "$d/hosts/$h/sshd_config" -E "$d/log/sshd-$h.log" </dev/null ||
      fail "sshd on $h did not start (see $d/log/sshd-$h.log)"
  done
  in_host login slurmctld -i </dev/null >>"$d/log/slurmctld.out" 2>&1 ||
    fail "slurmctld did not start (see $d/log/slurmctld.log)"
  for h in node1 node2; do
    in_host "$h" slurmd </dev/null >>"$d/log/slurmd-$h.out" 2>&1 ||
      fail "slurmd on $h did not start (see $d/log/slurmd-$h.log)"
  done
}

wait_ready() {
  local d=$LAB_DIR deadline=$((SECONDS + WAIT_S)) h pending
  pending=("${HOSTS[@]}")
  while [ ${#pending[@]} -gt 0 ]; do
    local still=()
    for h in "${pending[@]}"; do
      [ "$(ssh -F "$d/ssh_config" -o ConnectTimeout=2 "$h" hostname 2>/dev/null)" = "$h" ] || still+=("$h")
    done
    pending=("${still[@]+"${still[@]}"}")
    [ ${#pending[@]} -eq 0 ] && break
    [ $SECONDS -lt $deadline ] || fail "sshd did not accept connections within ${WAIT_S}s on: ${pending[*]}"
    sleep 0.1
  done
  local states=""
  while :; do
    states=$(in_host login sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | tr '\n' ' ') || true
    [ "$states" = "node1 idle node2 idle " ] && return 0
    [ $SECONDS -lt $deadline ] || fail "slurm nodes not idle within ${WAIT_S}s (sinfo: ${states:-no answer})"
    sleep 0.1
  done
}

fail() {
  log "error: $*"
  log "tearing the half-built lab down"
  do_down || true
  exit 1
}

is_up() {
  local h
  for h in "${HOSTS[@]}"; do
    [ -e "/run/netns/$(ns "$h")" ] || return 1
    kill -0 "$(cat "$LAB_DIR/run/holder-$h.pid" 2>/dev/null || echo 0)" 2>/dev/null || return 1
    [ "$(ssh -F "$LAB_DIR/ssh_config" -o ConnectTimeout=2 "$h" hostname 2>/dev/null)" = "$h" ] || return 1
  done
  [ "$(in_host login sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | tr '\n' ' ')" = "node1 idle node2 idle " ]
}

# sshd (StrictModes) and munged refuse keys under a folder others may write to
# (e.g. /tmp): say so up front rather than time out waiting for sshd.
check_lab_dir() {
  local p
  mkdir -p "$LAB_DIR"
  p=$(cd "$LAB_DIR" && pwd -P)
  while [ "$p" != / ]; do
    p=$(dirname "$p")
    if [ -n "$(find "$p" -maxdepth 0 \( -perm -g+w -o -perm -o+w \) -print)" ] || [ "$(stat -c %u "$p")" != 0 ]; then
      die "LAB_DIR=$LAB_DIR is under $p, which is not root's alone (group/other-writable or not owned by root): sshd and munged refuse keys there; pick another LAB_DIR"
    fi
  done
}

do_up() {
  need_root
  check_lab_dir
  [ -e /proc/self/ns/net ] || die "this kernel has no network namespaces"
  install_packages
  if is_up 2>/dev/null; then
    echo "$LAB_DIR/ssh_config"
    return 0
  fi
  do_down  # whatever half of a lab is left goes first
  # Homes start empty on every fresh up (nothing is mounted in them now: their
  # mounts lived in the namespaces that do_down ended).
  # The homes hold binds of the real ~/.cache etc. only inside the hosts' private
  # mount namespaces; refuse to delete anything if one ever shows up here.
  if grep -qF " $LAB_DIR/homes" /proc/self/mountinfo; then
    die "something is mounted under $LAB_DIR/homes in the root namespace; not deleting it"
  fi
  rm -rf --one-file-system "$LAB_DIR/homes" "$LAB_DIR/state" "$LAB_DIR/spool"
  write_files
  write_ssh_config
  build_net || fail "could not build the lab network (bridge $BRIDGE, namespaces)"
  start_hosts
  wait_ready
  echo "$LAB_DIR/ssh_config"
}

do_status() {
  local h n pid
  if ! ip link show "$BRIDGE" >/dev/null 2>&1 && [ -z "$(ip netns list 2>/dev/null | grep "^$NS_PREFIX" || true)" ]; then
    echo "lab: down"
    return 0
  fi
  echo "lab dir: $LAB_DIR"
  echo "bridge:  $BRIDGE $(ip -br link show "$BRIDGE" 2>/dev/null | awk '{print $2}')"
  for h in "${HOSTS[@]}"; do
    n=$(ns "$h")
    if [ -e "/run/netns/$n" ]; then
      pid=$(cat "$LAB_DIR/run/holder-$h.pid" 2>/dev/null || true)
      local procs
      procs=$(for p in $(lab_pids); do
        [ "$(readlink "/proc/$p/ns/net")" = "$(readlink "/proc/${pid:-0}/ns/net" 2>/dev/null)" ] &&
          cat "/proc/$p/comm"
      done 2>/dev/null | sort | uniq -c | awk '{printf "%s%s ", $2, ($1>1 ? "x" $1 : "")}' || true)
      echo "$h: ${ADDR[$h]} netns $n; processes: ${procs:-none}"
    else
      echo "$h: no namespace"
    fi
  done
  if [ -n "${pid:-}" ] && kill -0 "$(cat "$LAB_DIR/run/holder-login.pid" 2>/dev/null || echo 0)" 2>/dev/null; then
    in_host login sinfo -N -o '%N %t' 2>/dev/null || echo "slurm: no answer"
  fi
  [ -f "$LAB_DIR/ssh_config" ] && echo "ssh config: $LAB_DIR/ssh_config"
  return 0
}

case "${1:-}" in
  up) do_up ;;
  down) do_down ;;
  status) do_status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
