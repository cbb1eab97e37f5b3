#!/usr/bin/env bash
# Build one of the static C programs the executable carries (the NAME.c in patches/), statically against musl into
# dist/shells-static/<platform>/NAME, where build.ts embeds it: `bash scripts/build-static-c.sh NAME [ARCH]`.
# Used by build-room-launcher.sh and build-sandbox-exec.sh (whose headers say what each program is). The compilers
# are build-shells-static.sh's: musl-gcc from musl-tools on x86_64, the musl cross compiler that script builds for
# aarch64. Rebuilt only when the source or these scripts are newer than the binary. A second or so.
set -euo pipefail
name=${1:?usage: build-static-c.sh NAME [ARCH]}
trap 'echo "build-$name: failed (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
arch=${2:-$(uname -m)}
case "$arch" in
  x86_64 | amd64) platform=linux-x64 CC=${CC_X86_64:-musl-gcc} STRIP=strip ;;
  aarch64 | arm64) platform=linux-arm64 CC=${CC_AARCH64:-$PWD/.cache/shells-static/aarch64/musl/bin/musl-gcc} STRIP=aarch64-linux-gnu-strip ;;
  *) echo "build-$name: unsupported architecture $arch" >&2; exit 2 ;;
esac
out=dist/shells-static/$platform/$name
if [ -x "$out" ] && [ "$out" -nt "patches/$name.c" ] && [ "$out" -nt "$(dirname "$0")/build-$name.sh" ] && [ "$out" -nt scripts/build-static-c.sh ]; then
  exit 0
fi
mkdir -p "$(dirname "$out")"
"$CC" -static -Os -Wall -Wextra -Werror -o "$out.tmp" "patches/$name.c"
"$STRIP" "$out.tmp"
mv "$out.tmp" "$out"
echo "$name built: $out ($(stat -c %s "$out") bytes)"
