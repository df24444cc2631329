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
# the package lists once per boot: a second install right after reuses them
stamp=/run/trainium-lens-apt-updated
[ -f "$stamp" ] || { apt-get update -qq >/dev/null && touch "$stamp"; }
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || {
  apt-get update -qq >/dev/null # lists older than a package's new version
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
