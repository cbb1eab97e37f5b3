#!/usr/bin/env bash
# Check that the install list covers what the shell build really runs: build both patched shells once more under
# `strace -f` (execve only), map every program that was executed to its Debian package (`dpkg -S`), and fail if
# a package is neither in SHELL_BUILD_PKGS (scripts/apt.sh), nor pulled in by them (Depends/Pre-Depends,
# recursively), nor part of every Debian system (Essential or Priority: required). This is the check that would
# have caught `autoconf` missing from the list. Needs strace and the unpacked sources (run build-shells.sh first);
# takes a little longer than the shell build (measured: 4 min 45 s on 2 busy cores, 2.5 min of CPU). Writes nothing outside .cache/.
set -euo pipefail
trap 'echo "check-build-deps: failed (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$ROOT/.cache/build-deps
. scripts/apt.sh
# --without PKG: check as if PKG were not in the list (a self-test: `--without autoconf` must fail).
if [ "${1:-}" = "--without" ] && [ -n "${2:-}" ]; then
  mapfile -t SHELL_BUILD_PKGS < <(printf '%s\n' "${SHELL_BUILD_PKGS[@]}" | grep -v -x -F "$2")
fi
command -v strace >/dev/null || { echo "check-build-deps: strace is not installed" >&2; exit 1; }
for d in bash-5.2.15 zsh-5.9; do
  [ -d ".cache/shells/$d" ] || { echo "check-build-deps: .cache/shells/$d missing: run scripts/build-shells.sh first" >&2; exit 1; }
done

rm -rf "$WORK" && mkdir -p "$WORK"
cp -a .cache/shells/bash-5.2.15 "$WORK/bash" && cp -a .cache/shells/zsh-5.9 "$WORK/zsh"
# The same steps as build-shells.sh (its patches, the in-shell client's source, its configure flags), traced.
build='(cd "$1/bash" && patch -s -p1 -i "$2/patches/bash-5.2.15-exec-wrapper.patch" && cp "$2/patches/escalate-client.c" . && ./configure -q --without-bash-malloc --disable-nls && make -s bash) & b=$!
(cd "$1/zsh" && patch -s -p1 -i "$2/patches/zsh-5.9-exec-wrapper.patch" && cp "$2/patches/escalate-client.c" Src/ && ./configure -q --disable-dynamic --with-tcsetpgrp --enable-etcdir=/etc/zsh --disable-gdbm --disable-pcre && make -s) || exit
wait "$b"'
strace -f -qq --seccomp-bpf -e trace=execve -e status=successful -o "$WORK/trace" bash -c "$build" build "$WORK" "$ROOT" >"$WORK/build.log" 2>&1 \
  || { echo "check-build-deps: the traced build failed; end of $WORK/build.log:" >&2; tail -n 30 "$WORK/build.log" >&2; exit 1; }

# Programs executed, as real paths.
sed -n 's/^[0-9]* *execve("\([^"]*\)".*/\1/p' "$WORK/trace" | sort -u | while read -r p; do readlink -f "$p" || true; done | sort -u >"$WORK/programs"
# Their packages (a path dpkg does not know, e.g. a configure test binary inside the build tree, is skipped).
while read -r p; do
  case "$p" in "$WORK"/*) continue ;; esac
  dpkg -S "$p" 2>/dev/null | head -n1 | cut -d: -f1 || true
done <"$WORK/programs" | sort -u >"$WORK/used"

# What is allowed: the list, its dependency closure, and the base system.
{
  printf '%s\n' "${SHELL_BUILD_PKGS[@]}" "${SHELL_BUILD_OPTIONAL_PKGS[@]}"
  apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances "${SHELL_BUILD_PKGS[@]}" 2>/dev/null | sed -n 's/^ *\(Pre\)\{0,1\}Depends: <\{0,1\}\([^ >:]*\).*/\2/p; /^[a-z0-9]/p'
  dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' | awk '$2 == "yes" || $3 == "required" { print $1 }'
} | sed 's/:.*//' | sort -u >"$WORK/allowed"

rm -rf "${WORK:?}/bash" "${WORK:?}/zsh"
missing=$(comm -23 "$WORK/used" "$WORK/allowed")
echo "check-build-deps: the build ran $(wc -l <"$WORK/programs") programs from $(wc -l <"$WORK/used") packages"
if [ -n "$missing" ]; then
  echo "check-build-deps: the shell build uses packages missing from SHELL_BUILD_PKGS in scripts/apt.sh:" >&2
  for pkg in $missing; do
    echo "  $pkg: $(grep -F -x -f <(dpkg -L "$pkg" 2>/dev/null) "$WORK/programs" | head -n3 | tr '\n' ' ')" >&2
  done
  exit 1
fi
echo "check-build-deps: every package the build uses is installed by scripts/install.sh"
