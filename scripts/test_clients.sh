#!/usr/bin/env bash
# The real-client suite (tests/test_agent_clients.py, marker `clients`): installs the coding-agent
# clients pinned in tests/clients/package.json (OpenCode, Claude Code) from npm into a cache
# directory, then drives them against `sage mcp` with a local fake model server.
#   scripts/test_clients.sh [pytest args]     # e.g. -k opencode
# Needs node >= 20 and npm (apt-get install nodejs npm) and the npm registry; nothing else online.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
node_ok() { command -v npm >/dev/null && node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 1 : 0)'; }
if ! node_ok && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "test_clients.sh: installing nodejs and npm (apt)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
if ! node_ok; then
  echo "test_clients.sh: needs node >= 20 and npm (apt-get install nodejs npm)" >&2
  exit 2
fi
cache="${SAGE_CLIENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sage-agent-clients}"
mkdir -p "$cache"
if ! cmp -s "$here/tests/clients/package.json" "$cache/package.json" || [ ! -x "$cache/node_modules/.bin/opencode" ]; then
  cp "$here/tests/clients/package.json" "$cache/package.json"
  # the packages' postinstall scripts link their native binaries (npm >= 11 warns; they still run)
  npm install --prefix "$cache" --no-audit --no-fund --loglevel=error
fi
export SAGE_AGENT_CLIENTS="$cache/node_modules/.bin"
"$SAGE_AGENT_CLIENTS/opencode" --version >/dev/null
"$SAGE_AGENT_CLIENTS/claude" --version >/dev/null
cd "$here"
PYTHONPATH="$here/src${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m pytest tests/test_agent_clients.py -m clients -q "$@"
