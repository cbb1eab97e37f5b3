#!/usr/bin/env bash
# Build the patched bash 5.2.15 and zsh 5.9 from Debian bookworm's source packages, with our exec-wrapper
# patches from patches/, into dist/shells/{bash,zsh}. Idempotent: when both binaries exist and were built
# from the current patches (stamp = sha256 of the patch files and this script), it does nothing.
#
#   bash scripts/build-shells.sh          build if needed
#   bash scripts/build-shells.sh --force  rebuild
#
# Needs root for apt-get (adds a deb-src entry for bookworm if none is configured).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/dist/shells
WORK=$ROOT/.cache/shells
STAMP=$OUT/.stamp
want=$(cat patches/bash-5.2.15-exec-wrapper.patch patches/zsh-5.9-exec-wrapper.patch patches/escalate-client.c scripts/build-shells.sh | sha256sum | cut -d' ' -f1)

if [ "${1:-}" != "--force" ] && [ -x "$OUT/bash" ] && [ -x "$OUT/zsh" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "patched shells up to date in $OUT"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt_updated=
. scripts/apt.sh
apt_update() { [ -n "$apt_updated" ] || { apt_retry update -qq; apt_updated=1; }; }

# Build tools and libraries.
missing=()
for p in build-essential autoconf dpkg-dev libncurses-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
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
fetch() { # $1 = source package, $2 = unpacked dir name
  if [ ! -d "$WORK/$2" ]; then
    apt_update
    (cd "$WORK" && apt-get source -qq "$1" >/dev/null 2>&1) || { apt_updated=; apt_update; (cd "$WORK" && apt-get source -qq "$1"); }
  fi
}

build_bash() {
  local b=$WORK/build-bash
  rm -rf "$b" && cp -a "$WORK/bash-5.2.15" "$b"
  (cd "$b" && patch -p1 --quiet < "$ROOT/patches/bash-5.2.15-exec-wrapper.patch")
  cp "$ROOT/patches/escalate-client.c" "$b/"
  (cd "$b" && ./configure --quiet --without-bash-malloc --disable-nls >/dev/null && make -s -j"$(nproc)" bash >/dev/null 2>&1)
  install -m 0755 "$b/bash" "$OUT/bash"
}

build_zsh() {
  local b=$WORK/build-zsh
  rm -rf "$b" && cp -a "$WORK/zsh-5.9" "$b"
  (cd "$b" && patch -p1 --quiet < "$ROOT/patches/zsh-5.9-exec-wrapper.patch")
  cp "$ROOT/patches/escalate-client.c" "$b/Src/"
  # --disable-dynamic links every module into the one binary, so dist/shells/zsh needs no module directory.
  # --enable-etcdir=/etc/zsh reads the same startup files as Debian's zsh.
  (cd "$b" && ./configure --quiet --disable-dynamic --with-tcsetpgrp --enable-etcdir=/etc/zsh --disable-gdbm --disable-pcre >/dev/null \
    && make -s -j"$(nproc)" >/dev/null 2>&1)
  install -m 0755 "$b/Src/zsh" "$OUT/zsh"
}

# Fetch sequentially (two apt-get runs at once contend for apt's lock), then build in parallel.
fetch bash bash-5.2.15
fetch zsh zsh-5.9
build_bash &
bash_pid=$!
build_zsh
wait "$bash_pid"
echo "$want" > "$STAMP"
echo "patched shells built: $("$OUT/bash" -c 'echo bash $BASH_VERSION'), $("$OUT/zsh" -c 'echo zsh $ZSH_VERSION')"
