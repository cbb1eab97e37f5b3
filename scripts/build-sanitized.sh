#!/usr/bin/env bash
# Build ASan/UBSan variants of the C parts of shellmcp, for their tests (docs/escalation.md, "The escalation boundary: what an allow rule grants"):
# the room launcher (patches/room-launcher.c), sandbox-exec (patches/sandbox-exec.c) and, with --shells, bash and zsh with our exec-wrapper patches and the
# in-shell escalation client (patches/escalate-client.c). glibc and gcc -fsanitize=address,undefined (ASan does not
# link statically, so these are not the carried musl builds: same sources, another libc), -fno-sanitize-recover:
# the first finding stops the program. Into $SHELLMCP_SANITIZED_DIR (default .cache/sanitized/), never into dist/.
# Rebuilt only when a source or this script is newer. The launcher takes a second; the shells a few minutes.
#
# Then run the tests against them:
#   SHELLMCP_TEST_ROOM_LAUNCHER=.cache/sanitized/room-launcher bun test test/sandbox/room-launcher.test.ts \
#     test/sandbox/room-launcher-mutation.test.ts
#   SHELLMCP_TEST_SANDBOX_EXEC=.cache/sanitized/sandbox-exec bun test test/sandbox/sandbox-exec.test.ts
#   SHELLMCP_TEST_SHELLS_DIR=.cache/sanitized bun test test/escalate/in-shell-client.test.ts test/escalate/cross-compat.test.ts
# (test/sandbox/sanitized.test.ts does both when the builds are there.)
set -euo pipefail
trap 'echo "build-sanitized: failed (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${SHELLMCP_SANITIZED_DIR:-$ROOT/.cache/sanitized}
mkdir -p "$OUT"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"

# The tests start these programs with environments of their own (no ASAN_OPTIONS): the options are built in. No leak
# report: bash and zsh keep what they allocate until they exit (their own, not the client's), and a program that
# execs leaks nothing. Everything else (overflows, use after free, undefined behaviour) stops the program.
DEFAULTS=$OUT/asan-defaults.c
cat >"$DEFAULTS" <<'C'
const char *__asan_default_options(void) { return "detect_leaks=0:abort_on_error=0:allow_user_segv_handler=1"; }
const char *__ubsan_default_options(void) { return "print_stacktrace=1:halt_on_error=1"; }
C

launcher=$OUT/room-launcher
if ! [ -x "$launcher" ] || [ patches/room-launcher.c -nt "$launcher" ] || [ "$0" -nt "$launcher" ]; then
  gcc $SAN -Wall -Wextra -Werror -o "$launcher.tmp" patches/room-launcher.c "$DEFAULTS"
  mv "$launcher.tmp" "$launcher"
  echo "sanitized room launcher: ${launcher#"$ROOT"/}"
fi
sandboxexec=$OUT/sandbox-exec
if ! [ -x "$sandboxexec" ] || [ patches/sandbox-exec.c -nt "$sandboxexec" ] || [ "$0" -nt "$sandboxexec" ]; then
  gcc $SAN -Wall -Wextra -Werror -o "$sandboxexec.tmp" patches/sandbox-exec.c "$DEFAULTS"
  mv "$sandboxexec.tmp" "$sandboxexec"
  echo "sanitized sandbox-exec: ${sandboxexec#"$ROOT"/}"
fi
[ "${1:-}" = "--shells" ] || exit 0

DL=$ROOT/.cache/shells-static/src
[ -f "$DL/bash_5.2.15.orig.tar.gz" ] && [ -f "$DL/zsh_5.9.orig.tar.xz" ] ||
  { echo "build-sanitized: run scripts/build-shells-static.sh first (it fetches and checks the sources into ${DL#"$ROOT"/})" >&2; exit 2; }
stamp=$( { cat patches/bash-5.2.15-exec-wrapper.patch patches/zsh-5.9-exec-wrapper.patch patches/escalate-client.c "$0"; } | sha256sum | cut -d' ' -f1)
if [ -x "$OUT/bash" ] && [ -x "$OUT/zsh" ] && [ "$(cat "$OUT/.shells-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "sanitized shells up to date in $OUT"
  exit 0
fi
WORK=$OUT/build
LOG=$OUT/build.log
rm -rf "$WORK"
mkdir -p "$WORK"
: >"$LOG"
step() { local name=$1; shift; echo "build-sanitized: $name"; "$@" >>"$LOG" 2>&1 || { echo "build-sanitized: '$name' failed; tail of $LOG:" >&2; tail -n 30 "$LOG" >&2; exit 1; }; }
unpack() { # DIR ORIG DEBIAN: the orig tarball with Debian's patch series applied, as build-shells-static.sh does
  mkdir -p "$WORK/$1.tmp" && tar -xf "$DL/$2" -C "$WORK/$1.tmp" && mv "$WORK/$1.tmp"/* "$WORK/$1" && rmdir "$WORK/$1.tmp"
  tar -xf "$DL/$3" -C "$WORK/$1"
  while IFS= read -r p; do
    case "$p" in '' | '#'*) continue ;; esac
    patch -d "$WORK/$1" -p1 -s <"$WORK/$1/debian/patches/${p%% *}"
  done <"$WORK/$1/debian/patches/series"
}
step "bash: unpack" unpack bash-5.2.15 bash_5.2.15.orig.tar.gz bash_5.2.15-2.debian.tar.xz
step "zsh: unpack" unpack zsh-5.9 zsh_5.9.orig.tar.xz zsh_5.9-4.debian.tar.xz
step "our patches" sh -c "patch -d '$WORK/bash-5.2.15' -p1 <'$ROOT/patches/bash-5.2.15-exec-wrapper.patch' &&
  patch -d '$WORK/zsh-5.9' -p1 <'$ROOT/patches/zsh-5.9-exec-wrapper.patch' &&
  cp '$ROOT/patches/escalate-client.c' '$WORK/bash-5.2.15/' && cp '$ROOT/patches/escalate-client.c' '$WORK/zsh-5.9/Src/'"
gcc -c -O1 -o "$OUT/asan-defaults.o" "$DEFAULTS"
export CC=gcc CFLAGS="$SAN" LDFLAGS="-fsanitize=address,undefined" LIBS="$OUT/asan-defaults.o"
jobs=$(nproc)
cd "$WORK/bash-5.2.15"
step "bash: configure" ./configure --without-bash-malloc --disable-nls
step "bash: make" make -j"$jobs" bash
install -m 0755 bash "$OUT/bash"
cd "$WORK/zsh-5.9"
step "zsh: configure" ./configure --disable-dynamic --with-tcsetpgrp --enable-etcdir=/etc/zsh --disable-gdbm --disable-pcre --disable-cap
step "zsh: make" make -j"$jobs"
install -m 0755 Src/zsh "$OUT/zsh"
echo "$stamp" >"$OUT/.shells-stamp"
rm -rf "$WORK"
echo "sanitized shells: $OUT/bash $OUT/zsh"
