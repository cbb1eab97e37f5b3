#!/usr/bin/env bash
# Check that the install list covers what the shell build really runs: build the patched shells once more (the
# static ones, scripts/build-shells-static.sh, the only shell build the install runs) under `strace -f` (execve
# only), in a scratch copy of scripts/ and patches/ with the sources already downloaded, map every program that was
# executed to its Debian package (`dpkg -S`), and fail if a package is neither in SHELL_BUILD_PKGS
# (scripts/apt.sh), nor pulled in by them (Depends/Pre-Depends, recursively), nor part of every Debian system
# (Essential or Priority: required). This is the check that would have caught `autoconf` missing from the list.
# Needs strace and the downloaded sources (run build-shells-static.sh first); takes a little longer than the
# shell build. Writes nothing outside .cache/.
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
[ -d .cache/shells-static/src ] || { echo "check-build-deps: .cache/shells-static/src missing: run scripts/build-shells-static.sh first" >&2; exit 1; }

rm -rf "$WORK" && mkdir -p "$WORK/tree/.cache/shells-static"
cp -a scripts patches "$WORK/tree/" && cp -a .cache/shells-static/src "$WORK/tree/.cache/shells-static/"
# The same build as the install's, traced (its downloads are already there and checked against their pins).
strace -f -qq --seccomp-bpf -e trace=execve -e status=successful -o "$WORK/trace" \
  bash "$WORK/tree/scripts/build-shells-static.sh" --force >"$WORK/build.log" 2>&1 \
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

rm -rf "${WORK:?}/tree"
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
