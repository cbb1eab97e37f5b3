#!/usr/bin/env bash
# The main job, once: start `dist/shellmcp serve`, speak MCP to it on stdio (initialize, tools/list, one
# `shell` call under the default read-only sandbox), print the answers, stop. Each request waits for the
# answer it depends on (no fixed sleeps); the whole exchange gives up after DEMO_TIMEOUT_S seconds (60).
set -euo pipefail
cd "$(dirname "$0")/.."
# A CODEX_HOME of its own, outside /tmp, $TMPDIR and /dev/shm: serve loads no rules or config.toml from a folder
# sandboxed commands can write (issue 34), and says so in every call.
home=$(mktemp -d /var/tmp/shellmcp-demo.XXXXXX)
timeout_s=${DEMO_TIMEOUT_S:-60}
coproc SERVER { CODEX_HOME="$home" exec dist/shellmcp serve; }
server_pid=$SERVER_PID
to_server=${SERVER[1]}
from_server=${SERVER[0]}
trap 'kill "$server_pid" 2>/dev/null || true; rm -rf "$home"' EXIT

send() { printf '%s\n' "$1" >&"$to_server"; }
# await ID: print the server's lines until the answer to request ID.
await() {
  local line
  while IFS= read -r -t "$timeout_s" -u "$from_server" line; do
    printf '%s\n\n' "$line"
    case "$line" in *"\"id\":$1}"* | *"\"id\":$1,"*) return 0 ;; esac
  done
  echo "demo: no answer to request $1 within ${timeout_s}s" >&2
  return 1
}

send '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"0"}}}'
await 1
send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
send '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
await 2
send "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\",\"arguments\":{\"command\":\"echo hello from shellmcp; uname -sr; touch /etc/demo || true\",\"workdir\":\"$PWD\",\"login\":false}}}"
await 3
# Closing stdin ends the server.
exec {to_server}>&-
wait "$server_pid" 2>/dev/null || true
