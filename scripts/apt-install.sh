#!/usr/bin/env bash
# apt-get install PKG... of the ones not installed yet, one apt at a time: the set-up
# scripts run side by side (scripts/test.sh) and the lab installs its daemons during the
# tests (scripts/lab-nodes.sh), while dpkg refuses a second apt at once. Needs root.
set -euo pipefail
missing=()
for pkg in "$@"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
((${#missing[@]})) || exit 0
exec 9>/var/lock/trainium-lens-apt.lock
flock 9
export DEBIAN_FRONTEND=noninteractive
# man-db's trigger re-indexes the manual after every install: ~4 s of CPU each time
# (`apt-get install rsync` 7.1 s -> 2.9 s on a 2-core machine), for the index only
# apropos and whatis read (`man PAGE` needs none). Off for our installs, put back after,
# so its daily job indexes the new pages; a flag an earlier run was killed holding is
# put back too.
manflag=/var/lib/man-db/auto-update
if [ -e "$manflag" ] || [ -e "$manflag.held" ]; then
  [ ! -e "$manflag" ] || mv -f "$manflag" "$manflag.held"
  trap 'mv -f "$manflag.held" "$manflag"' EXIT
fi
# the package lists once per boot: a second install right after reuses them
stamp=/run/trainium-lens-apt-updated
[ -f "$stamp" ] || { apt-get update -qq >/dev/null && touch "$stamp"; }
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || {
  apt-get update -qq >/dev/null # lists older than a package's new version
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
