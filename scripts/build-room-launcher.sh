#!/usr/bin/env bash
# Build the room launcher (patches/room-launcher.c: the process that stays in a call's escalation room and starts
# each escalated program in it, src/sandbox/linux/room-launcher.ts) statically against musl, into
# dist/shells-static/<platform>/room-launcher, where build.ts embeds it. Called by build-shells-static.sh (whose
# compilers it uses: musl-gcc from musl-tools on x86_64, the musl cross compiler that script builds for aarch64).
# Rebuilt only when the source or this script is newer than the binary. A second or so.
set -euo pipefail
exec bash "$(dirname "$0")/build-static-c.sh" room-launcher "$@"
