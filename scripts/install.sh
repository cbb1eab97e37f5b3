#!/usr/bin/env bash
# Install everything shellmcp needs on a fresh Debian bookworm machine (as root), then build it:
# system packages (scripts/apt.sh lists them), Node and npm when missing, npm dependencies (Bun comes from the
# npm registry), the patched bash and zsh (built once: the static, musl ones the executable carries, which the
# tests, the demo and `--shell` use too), the binary. Idempotent: a second run only rebuilds the binary.
set -euo pipefail
# Nothing fails silently: name the command and line that stopped the script.
trap 'echo "install: failed (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
. scripts/apt.sh
mapfile -t need_pkgs < <(missing_pkgs "${SHELL_BUILD_PKGS[@]}" "${RUN_PKGS[@]}")
command -v node >/dev/null || need_pkgs+=(nodejs)
command -v npm >/dev/null || need_pkgs+=(npm)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  echo "install: apt-get install ${need_pkgs[*]}"
  apt_retry update -qq
  apt_retry install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

if [ ! -x node_modules/.bin/bun ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

# The patched shells, once: the portable (static, musl) ones the executable carries (issue 25) and the tests run
# (test/helpers/shells.ts): ~3 min on 2 cores the first time, cached in .cache/shells-static/ afterwards. The
# Debian-linked build (scripts/build-shells.sh, into dist/shells/) is optional and not run here (issue 33).
bash scripts/build-shells-static.sh
# The from-source layout: copies of those same shells beside the executable, in dist/shells/, where `serve` looks
# before its carried ones and where the exec wrapper finds the bash that runs a script without `#!` (so that the
# script's own commands are intercepted too; src/escalate/protocol/wrapper.ts). Copies, not a second build; a Debian-linked
# dist/shells/ from scripts/build-shells.sh (optional) is left alone.
platform=linux-$(uname -m | sed 's/x86_64/x64/; s/aarch64/arm64/')
if [ ! -e dist/shells/.stamp ] || grep -q '^static:' dist/shells/.stamp; then
  mkdir -p dist/shells
  install -m 0755 "dist/shells-static/$platform/bash" "dist/shells-static/$platform/zsh" dist/shells/
  echo "static:$(cat "dist/shells-static/$platform/.stamp")" >dist/shells/.stamp
fi
node_modules/.bin/bun build.ts
