#!/usr/bin/env bash
# Build the room launcher (patches/room-launcher.c: the process that stays in a call's escalation room and starts
# each escalated program in it, src/sandbox/linux/room-launcher.ts) statically against musl, into
# dist/shells-static/<platform>/room-launcher, where build.ts embeds it. Called by build-shells-static.sh (whose
# compilers it uses: musl-gcc from musl-tools on x86_64, the musl cross compiler that script builds for aarch64).
# Rebuilt only when the source or this script is newer than the binary. A second or so.
set -euo pipefail
trap 'echo "build-room-launcher: failed (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
arch=${1:-$(uname -m)}
case "$arch" in
  x86_64 | amd64) platform=linux-x64 CC=${CC_X86_64:-musl-gcc} STRIP=strip ;;
  aarch64 | arm64) platform=linux-arm64 CC=${CC_AARCH64:-$PWD/.cache/shells-static/aarch64/musl/bin/musl-gcc} STRIP=aarch64-linux-gnu-strip ;;
  *) echo "build-room-launcher: unsupported architecture $arch" >&2; exit 2 ;;
esac
out=dist/shells-static/$platform/room-launcher
if [ -x "$out" ] && [ "$out" -nt patches/room-launcher.c ] && [ "$out" -nt scripts/build-room-launcher.sh ]; then exit 0; fi
mkdir -p "$(dirname "$out")"
"$CC" -static -Os -Wall -Wextra -Werror -o "$out.tmp" patches/room-launcher.c
"$STRIP" "$out.tmp"
mv "$out.tmp" "$out"
echo "room launcher built: $out ($(stat -c %s "$out") bytes)"
