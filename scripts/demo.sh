#!/usr/bin/env bash
# The main job, once: start `dist/shellmcp serve`, speak MCP to it on stdio (initialize, tools/list, one
# `shell` call under the default read-only sandbox), print the answers, stop.
set -euo pipefail
cd "$(dirname "$0")/.."
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
{
  printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"0"}}}'
  printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  printf '%s\n' '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
  printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\",\"arguments\":{\"command\":\"echo hello from shellmcp; uname -sr; touch /etc/demo || true\",\"workdir\":\"$PWD\",\"login\":false}}}"
  sleep 3
} | CODEX_HOME="$home" dist/shellmcp serve | while IFS= read -r line; do
  printf '%s\n\n' "$line"
  case "$line" in *'"id":3'*) break ;; esac
done
