#!/usr/bin/env bash
# Build the patched bash 5.2.15 and zsh 5.9 on macOS, from the same sources as scripts/build-shells.sh uses on
# Debian: the upstream tarballs and Debian bookworm's patch series (bash 5.2.15-2, zsh 5.9-4), downloaded from
# deb.debian.org and checked against the SHA-256 sums of the bookworm source packages, then our exec-wrapper
# patches from patches/. Output: dist/shells/{bash,zsh}, as on Linux. Idempotent (same stamp scheme).
#
#   bash scripts/build-shells-macos.sh                 build if needed (macOS)
#   bash scripts/build-shells-macos.sh --force         rebuild
#   bash scripts/build-shells-macos.sh --prepare-only  fetch, verify and patch the sources only (any OS; CI runs
#                                                      this on Linux to check that the patch series still apply)
#
# Needs on macOS: the Xcode command line tools (cc, make, patch), curl, and autoconf (`brew install autoconf`:
# Debian's zsh patches touch aczsh.m4, so zsh's Makefile reruns autoconf). No root, no Homebrew bash/zsh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/dist/shells
WORK=$ROOT/.cache/shells-macos
STAMP=$OUT/.stamp-macos
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mode=${1:-}

sha256() { if command -v shasum >/dev/null; then shasum -a 256 "$1"; else sha256sum "$1"; fi | cut -d' ' -f1; }
ncpu() { sysctl -n hw.ncpu 2>/dev/null || nproc; }

want=$(cat patches/bash-5.2.15-exec-wrapper.patch patches/zsh-5.9-exec-wrapper.patch patches/escalate-client.c scripts/build-shells-macos.sh | (shasum -a 256 2>/dev/null || sha256sum) | cut -d' ' -f1)
if [ "$mode" = "" ] && [ -x "$OUT/bash" ] && [ -x "$OUT/zsh" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "patched shells up to date in $OUT"
  exit 0
fi
if [ "$mode" != "--prepare-only" ] && [ "$(uname -s)" != "Darwin" ]; then
  echo "build-shells-macos.sh builds on macOS (use scripts/build-shells.sh on Debian, or --prepare-only here)" >&2
  exit 2
fi

# name  pool-path  sha256 (from the bookworm .dsc files: bash_5.2.15-2.dsc, zsh_5.9-4.dsc)
SOURCES="
bash_5.2.15.orig.tar.gz      b/bash 7a315bc0e9d90713159e4390ec1096a41e4f33cd8cc3d1a749a8e5ad56600f51
bash_5.2.15-2.debian.tar.xz  b/bash 998f8ea5b754a734ae7d8306e149c43d713ddfcf49623a036004b729237dbcca
zsh_5.9.orig.tar.xz          z/zsh  9b8d1ecedd5b5e81fbf1918e876752a7dd948e05c1a0dba10ab863842d45acd5
zsh_5.9-4.debian.tar.xz      z/zsh  44ff8339a70cc3aaad2d336f23fc5903fe73fa7d7d3518a7af9205275ca72ac8
"

mkdir -p "$WORK" "$OUT"
echo "$SOURCES" | while read -r name pool sum; do
  [ -n "$name" ] || continue
  f=$WORK/$name
  if [ ! -f "$f" ] || [ "$(sha256 "$f")" != "$sum" ]; then
    curl -fsSL --retry 3 -o "$f.part" "$MIRROR/pool/main/$pool/$name"
    got=$(sha256 "$f.part")
    if [ "$got" != "$sum" ]; then
      echo "checksum mismatch for $name: got $got, want $sum" >&2
      rm -f "$f.part"
      exit 1
    fi
    mv "$f.part" "$f"
  fi
done

# Unpack upstream + debian/, apply Debian's quilt series in order (what dpkg-source -x does), then ours.
prepare() { # $1 = dir name, $2 = orig tarball, $3 = debian tarball, $4 = our patch
  local d=$WORK/$1
  rm -rf "$d" "$d.tmp" && mkdir -p "$d.tmp"
  tar -xf "$WORK/$2" -C "$d.tmp"
  mv "$d.tmp"/* "$d" && rmdir "$d.tmp"
  tar -xf "$WORK/$3" -C "$d"
  local p
  while IFS= read -r p; do
    case "$p" in '' | '#'*) continue ;; esac
    patch -d "$d" -p1 -s < "$d/debian/patches/${p%% *}"
  done < "$d/debian/patches/series"
  patch -d "$d" -p1 -s < "$ROOT/patches/$4"
}
prepare bash-5.2.15 bash_5.2.15.orig.tar.gz bash_5.2.15-2.debian.tar.xz bash-5.2.15-exec-wrapper.patch
prepare zsh-5.9 zsh_5.9.orig.tar.xz zsh_5.9-4.debian.tar.xz zsh-5.9-exec-wrapper.patch
cp "$ROOT/patches/escalate-client.c" "$WORK/bash-5.2.15/" && cp "$ROOT/patches/escalate-client.c" "$WORK/zsh-5.9/Src/"
if [ "$mode" = "--prepare-only" ]; then
  echo "sources fetched, verified and patched in $WORK"
  exit 0
fi

# bash: no bash malloc (macOS's allocator), no NLS (no gettext dependency).
(cd "$WORK/bash-5.2.15" && ./configure --quiet --without-bash-malloc --disable-nls >/dev/null && make -s -j"$(ncpu)" bash >/dev/null)
install -m 0755 "$WORK/bash-5.2.15/bash" "$OUT/bash"

# zsh: every module linked in (no module folder to ship); the startup files macOS's own zsh reads (/etc/zshrc…).
(cd "$WORK/zsh-5.9" && ./configure --quiet --disable-dynamic --with-tcsetpgrp --enable-etcdir=/etc --disable-gdbm --disable-pcre >/dev/null \
  && make -s -j"$(ncpu)" >/dev/null)
install -m 0755 "$WORK/zsh-5.9/Src/zsh" "$OUT/zsh"

# Ad-hoc signature: arm64 macOS refuses to run unsigned binaries.
codesign -s - -f "$OUT/bash" "$OUT/zsh"
echo "$want" > "$STAMP"
echo "patched shells built: $("$OUT/bash" -c 'echo bash $BASH_VERSION'), $("$OUT/zsh" -c 'echo zsh $ZSH_VERSION')"
