#!/usr/bin/env bash
# Install everything shellmcp needs on a fresh Debian bookworm machine (as root), then build it:
# system packages, npm dependencies (Bun comes from the npm registry), the patched bash and zsh, the binary.
# Idempotent: a second run only rebuilds the binary.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
. scripts/apt.sh
need_pkgs=()
for p in build-essential autoconf bubblewrap git dpkg-dev libncurses-dev zsh curl python3 strace; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$p")
done
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  apt_retry update -qq
  apt_retry install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

if [ ! -x node_modules/.bin/bun ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

bash scripts/build-shells.sh
node_modules/.bin/bun build.ts
