#!/usr/bin/env bash
# Build sandbox-exec (patches/sandbox-exec.c: applies a Landlock + seccomp plan made by `serve` and execs a call's
# shell, src/sandbox/linux/sandbox-exec.ts) statically against musl, into dist/shells-static/<platform>/sandbox-exec,
# where build.ts embeds it. Called by build-shells-static.sh (whose compilers it uses: musl-gcc from musl-tools on
# x86_64, the musl cross compiler that script builds for aarch64), like build-room-launcher.sh.
# Rebuilt only when the source or this script is newer than the binary. A second or so.
set -euo pipefail
trap 'echo "build-sandbox-exec: failed (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
arch=${1:-$(uname -m)}
case "$arch" in
  x86_64 | amd64) platform=linux-x64 CC=${CC_X86_64:-musl-gcc} STRIP=strip ;;
  aarch64 | arm64) platform=linux-arm64 CC=${CC_AARCH64:-$PWD/.cache/shells-static/aarch64/musl/bin/musl-gcc} STRIP=aarch64-linux-gnu-strip ;;
  *) echo "build-sandbox-exec: unsupported architecture $arch" >&2; exit 2 ;;
esac
out=dist/shells-static/$platform/sandbox-exec
if [ -x "$out" ] && [ "$out" -nt patches/sandbox-exec.c ] && [ "$out" -nt scripts/build-sandbox-exec.sh ]; then exit 0; fi
mkdir -p "$(dirname "$out")"
"$CC" -static -Os -Wall -Wextra -Werror -o "$out.tmp" patches/sandbox-exec.c
"$STRIP" "$out.tmp"
mv "$out.tmp" "$out"
echo "sandbox-exec built: $out ($(stat -c %s "$out") bytes)"
