#!/usr/bin/env bash
# Build the patched bash 5.2.15 and zsh 5.9 from Debian bookworm's source packages (pinned to the versions the
# patches were made for: bash 5.2.15-2, zsh 5.9-4), with our exec-wrapper patches from patches/, into
# dist/shells/{bash,zsh}, linked against Debian's glibc and libtinfo. Optional: the install does not run it (it
# builds only the static shells, scripts/build-shells-static.sh, which the executable carries and the tests run);
# `serve` of dist/shellmcp prefers dist/shells/ beside it when present. Idempotent: when both binaries exist and were built from the current patches, pins and
# this script (stamp = sha256 of them), it does nothing.
#
#   bash scripts/build-shells.sh          build if needed
#   bash scripts/build-shells.sh --force  rebuild
#
# Each shell's build log is .cache/shells/build-{bash,zsh}.log; on failure the script names the failed step and
# prints the log's tail. Needs root for apt-get (adds a deb-src entry for bookworm if none is configured).
set -euo pipefail
# Nothing fails silently: name the command and line that stopped the script.
trap 'echo "build-shells: failed (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/dist/shells
WORK=$ROOT/.cache/shells
STAMP=$OUT/.stamp
BASH_SRC_VERSION=5.2.15-2
ZSH_SRC_VERSION=5.9-4
want=$({ echo "bash=$BASH_SRC_VERSION zsh=$ZSH_SRC_VERSION"
         cat patches/bash-5.2.15-exec-wrapper.patch patches/zsh-5.9-exec-wrapper.patch patches/escalate-client.c \
           scripts/build-shells.sh scripts/apt.sh
       } | sha256sum | cut -d' ' -f1)

if [ "${1:-}" != "--force" ] && [ -x "$OUT/bash" ] && [ -x "$OUT/zsh" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "patched shells up to date in $OUT"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt_updated=
. scripts/apt.sh
apt_update() { [ -n "$apt_updated" ] || { apt_retry update -qq; apt_updated=1; }; }

# Build tools and libraries (the list is in scripts/apt.sh).
mapfile -t missing < <(missing_pkgs "${DEBIAN_SHELL_BUILD_PKGS[@]}")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "build-shells: apt-get install ${missing[*]}"
  apt_update
  apt_retry install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# A deb-src entry for bookworm.
if ! grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  cat > /etc/apt/sources.list.d/shellmcp-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt_updated=
fi

mkdir -p "$WORK" "$OUT"

# fetch PACKAGE VERSION DIR: unpack PACKAGE=VERSION into $WORK/DIR, unless DIR already holds that version.
# The first attempt's output goes to $WORK/fetch-PACKAGE.log; if it fails, the script prints that log's tail,
# refreshes the package lists and tries once more, printing that attempt's errors as they come.
fetch() {
  local pkg=$1 version=$2 dir=$WORK/$3 log=$WORK/fetch-$1.log have
  have=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$dir/debian/changelog" 2>/dev/null || true)
  [ "$have" = "$version" ] && return 0
  rm -rf "$dir"
  apt_update
  if ! (cd "$WORK" && apt-get source -qq "$pkg=$version") >"$log" 2>&1; then
    echo "build-shells: 'apt-get source $pkg=$version' failed; its output ($log) ends with:" >&2
    tail -n 20 "$log" >&2
    echo "build-shells: refreshing the package lists and trying again" >&2
    apt_updated=
    apt_update
    (cd "$WORK" && apt-get source -qq "$pkg=$version")
  fi
}

# step NAME LOG CMD…: run CMD with its output appended to LOG; on failure, say which step failed, print the
# log's tail and return the command's status.
step() {
  local name=$1 log=$2 status=0
  shift 2
  echo "== $name: $*" >>"$log"
  "$@" >>"$log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    {
      echo "build-shells: step '$name' failed (exit status $status); last 40 lines of ${log#"$ROOT"/}:"
      tail -n 40 "$log"
    } >&2
  fi
  return "$status"
}

build_bash() {
  local b=$WORK/build-bash log=$WORK/build-bash.log
  : >"$log"
  rm -rf "$b" && cp -a "$WORK/bash-5.2.15" "$b" && cd "$b" || return
  step "bash: patch" "$log" patch -p1 -i "$ROOT/patches/bash-5.2.15-exec-wrapper.patch" || return
  cp "$ROOT/patches/escalate-client.c" "$b/" || return
  step "bash: configure" "$log" ./configure --without-bash-malloc --disable-nls || return
  step "bash: make" "$log" make -j"$(nproc)" bash || return
  install -m 0755 "$b/bash" "$OUT/bash"
}

build_zsh() {
  local b=$WORK/build-zsh log=$WORK/build-zsh.log
  : >"$log"
  rm -rf "$b" && cp -a "$WORK/zsh-5.9" "$b" && cd "$b" || return
  step "zsh: patch" "$log" patch -p1 -i "$ROOT/patches/zsh-5.9-exec-wrapper.patch" || return
  cp "$ROOT/patches/escalate-client.c" "$b/Src/" || return
  # --disable-dynamic links every module into the one binary, so dist/shells/zsh needs no module directory.
  # --enable-etcdir=/etc/zsh reads the same startup files as Debian's zsh.
  step "zsh: configure" "$log" ./configure --disable-dynamic --with-tcsetpgrp --enable-etcdir=/etc/zsh \
    --disable-gdbm --disable-pcre || return
  step "zsh: make" "$log" make -j"$(nproc)" || return
  install -m 0755 "$b/Src/zsh" "$OUT/zsh"
}

# Fetch sequentially (two apt-get runs at once contend for apt's lock), then build in parallel.
fetch bash "$BASH_SRC_VERSION" bash-5.2.15
fetch zsh "$ZSH_SRC_VERSION" zsh-5.9
(build_bash) &
bash_pid=$!
status=0
(build_zsh) || status=$?
wait "$bash_pid" || status=$?
if [ "$status" -ne 0 ]; then
  echo "build-shells: failed; full logs in .cache/shells/build-{bash,zsh}.log" >&2
  exit "$status"
fi
echo "$want" > "$STAMP"
echo "patched shells built: $("$OUT/bash" -c 'echo bash $BASH_VERSION'), $("$OUT/zsh" -c 'echo zsh $ZSH_VERSION')"
