#!/usr/bin/env bash
# Build sandbox-exec (patches/sandbox-exec.c: applies a Landlock + seccomp plan made by `serve` and execs a call's
# shell, src/sandbox/linux/sandbox-exec.ts) statically against musl, into dist/shells-static/<platform>/sandbox-exec,
# where build.ts embeds it. Called by build-shells-static.sh (whose compilers it uses: musl-gcc from musl-tools on
# x86_64, the musl cross compiler that script builds for aarch64), like build-room-launcher.sh.
# Rebuilt only when the source or this script is newer than the binary. A second or so.
set -euo pipefail
exec bash "$(dirname "$0")/build-static-c.sh" sandbox-exec "$@"
