#!/usr/bin/env bash
# What the SSH tests need on a fresh Debian machine (run as root): the OpenSSH
# server (the tests start their own sshd on loopback with a private config) and
# rsync. Fast and idempotent when already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-ssh: please install ${need[*]} (the SSH tests skip without them)" >&2
    exit 0
  fi
  bash scripts/apt-install.sh "${need[@]}"
fi
# sshd refuses to start without its privilege-separation directory.
if [ "$(id -u)" = 0 ]; then mkdir -p /run/sshd; fi
