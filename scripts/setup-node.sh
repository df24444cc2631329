#!/usr/bin/env bash
# The extension's toolchain (TypeScript, esbuild, ESLint, prettier, vsce,
# playwright-core): the project's npm dev dependencies, what `npm ci` installs.
#
# Reinstalled only when the lockfile changed: kept once per machine and lockfile
# under ~/.cache/trainium-lens/ (a fresh clone's `npm ci` is ~20 s), `node_modules`
# a symlink to it. A checkout's own node_modules folder is kept and updated in place.
set -euo pipefail
cd "$(dirname "$0")/.."

lock=$(sha256sum package-lock.json | cut -c1-16)
if [ -d node_modules ] && [ ! -L node_modules ]; then
  if [ ! -f "node_modules/.lens-lock-$lock" ]; then
    npm ci --no-audit --no-fund --loglevel=error
    touch "node_modules/.lens-lock-$lock"
  fi
  exit 0
fi
NM="${TRAINIUM_LENS_NODE_MODULES:-$HOME/.cache/trainium-lens/node-modules-$lock}"
mkdir -p "$(dirname "$NM")"
# one install at a time into the shared folder (two clones' CI on one machine)
exec 9>"$NM.lock"
flock 9
if [ ! -f "$NM/node_modules/.lens-lock-$lock" ]; then
  rm -rf "$NM" && mkdir -p "$NM"
  cp package.json package-lock.json "$NM/"
  (cd "$NM" && npm ci --no-audit --no-fund --loglevel=error)
  touch "$NM/node_modules/.lens-lock-$lock"
fi
ln -sfn "$NM/node_modules" node_modules
