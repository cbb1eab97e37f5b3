#!/usr/bin/env bash
# Build the portable patched shells: bash 5.2.15 and zsh 5.9 with our exec-wrapper patches, linked statically
# against musl (Debian's musl-tools) with a static terminfo library (ncurses 6.4, built with musl here), so one
# binary runs on any Linux distribution of that architecture: no glibc, no libtinfo, no zsh module folder (every
# zsh module that needs no missing library is linked in). Output: dist/shells-static/linux-<arch>/{bash,zsh}; build.ts embeds them in the
# executable.
#
# Sources are the same as scripts/build-shells.sh and scripts/build-shells-macos.sh use (Debian bookworm's bash
# 5.2.15-2 and zsh 5.9-4: upstream tarball plus Debian's patch series, then ours), plus ncurses 6.4's upstream
# tarball as Debian ships it (ncurses_6.4.orig.tar.gz), and for aarch64 musl 1.2.3's (musl_1.2.3.orig.tar.gz). Each file is downloaded from Debian's pool and checked
# against the SHA-256 sum pinned below (taken from the bookworm .dsc files, which Debian's archive signs); a
# mismatch stops the build. No root needed once musl-tools (aarch64: gcc-aarch64-linux-gnu) and gcc, curl, patch,
# make, xz-utils are installed; when they are missing and this runs as root, they are installed with apt-get.
# Measured on 2 busy cores: 135-190 s (x86_64), 276 s (aarch64, musl included).
#
#   bash scripts/build-shells-static.sh                    x86_64 (host), build if needed
#   bash scripts/build-shells-static.sh --force            rebuild
#   bash scripts/build-shells-static.sh --arch aarch64     cross-build for arm64 with Debian's gcc-aarch64-linux-gnu
#                                                          and a musl built here (see "aarch64" below); run under
#                                                          qemu-aarch64 at the end when qemu-user is installed
#
# Every step's output goes to .cache/shells-static/<arch>/build.log; the terminal gets one line per step with
# the time since the start, and on failure the step's name and the log's tail. Idempotent: a stamp (sha256 of the
# pins, our patches and this script) skips a build whose output is current.
set -euo pipefail
trap 'echo "build-shells-static: failed (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

arch=$(uname -m)
force=
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --arch) arch=$2; shift ;;
    *) echo "usage: build-shells-static.sh [--force] [--arch x86_64|aarch64]" >&2; exit 2 ;;
  esac
  shift
done
case "$arch" in
  x86_64 | amd64) arch=x86_64 platform=linux-x64 ;;
  aarch64 | arm64) arch=aarch64 platform=linux-arm64 ;;
  *) echo "build-shells-static: unsupported architecture $arch" >&2; exit 2 ;;
esac

DL=$ROOT/.cache/shells-static/src
WORK=$ROOT/.cache/shells-static/$arch
OUT=$ROOT/dist/shells-static/$platform
LOG=$WORK/build.log
STAMP=$OUT/.stamp

# name  pool-path  sha256 (bash_5.2.15-2.dsc, zsh_5.9-4.dsc, ncurses_6.4-4.dsc, musl_1.2.3-1.dsc of Debian bookworm)
SOURCES="
bash_5.2.15.orig.tar.gz      b/bash     7a315bc0e9d90713159e4390ec1096a41e4f33cd8cc3d1a749a8e5ad56600f51
bash_5.2.15-2.debian.tar.xz  b/bash     998f8ea5b754a734ae7d8306e149c43d713ddfcf49623a036004b729237dbcca
zsh_5.9.orig.tar.xz          z/zsh      9b8d1ecedd5b5e81fbf1918e876752a7dd948e05c1a0dba10ab863842d45acd5
zsh_5.9-4.debian.tar.xz      z/zsh      44ff8339a70cc3aaad2d336f23fc5903fe73fa7d7d3518a7af9205275ca72ac8
ncurses_6.4.orig.tar.gz      n/ncurses  6931283d9ac87c5073f30b6290c4c75f21632bb4fc3603ac8100812bed248159
musl_1.2.3.orig.tar.gz       m/musl     7d5b0b6062521e4627e099e4c9dc8248d32a30285e959b7eecaa780cf8cfd4a4
"

want=$({ echo "$arch"; echo "$SOURCES"; cat patches/bash-5.2.15-exec-wrapper.patch patches/zsh-5.9-exec-wrapper.patch \
  patches/escalate-client.c scripts/build-shells-static.sh; } | sha256sum | cut -d' ' -f1)
if [ -z "$force" ] && [ -x "$OUT/bash" ] && [ -x "$OUT/zsh" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "portable shells up to date in ${OUT#"$ROOT"/}"
  bash "$ROOT/scripts/build-room-launcher.sh" "$arch"
  bash "$ROOT/scripts/build-sandbox-exec.sh" "$arch"
  exit 0
fi

start=$(date +%s)
# progress MESSAGE: one line on the terminal, with the seconds since the start; also in the log.
progress() { echo "build-shells-static [$(( $(date +%s) - start ))s] $*"; echo "=== $*" >>"$LOG"; }
# step NAME CMD…: run CMD with its output appended to the log; on failure name the step and print the log's tail.
step() {
  local name=$1 status=0
  shift
  progress "$name"
  echo "\$ $*" >>"$LOG"
  "$@" >>"$LOG" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    echo "build-shells-static: step '$name' failed (exit status $status); last 40 lines of ${LOG#"$ROOT"/}:" >&2
    tail -n 40 "$LOG" >&2
    exit "$status"
  fi
}

# The compiler. x86_64: musl-gcc from musl-tools. aarch64: Debian packages no musl cross compiler (musl-tools has
# the native musl-gcc only, and musl-dev:arm64 needs a multiarch host), so musl 1.2.3 itself (Debian's orig
# tarball, pinned below) is built here with Debian's cross gcc (gcc-aarch64-linux-gnu), which gives a musl-gcc
# wrapper for it; CC_AARCH64 may name another musl cross compiler instead.
BUILD_CC=gcc
if [ "$arch" = x86_64 ]; then
  CC=${CC_X86_64:-musl-gcc}
  HOST=x86_64-linux-musl
  STRIP=strip
  need_tools="musl-gcc:musl-tools"
else
  CC=${CC_AARCH64:-$WORK/musl/bin/musl-gcc}
  HOST=aarch64-linux-musl
  STRIP=aarch64-linux-gnu-strip
  need_tools="aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu"
fi
need=()
for t in $need_tools gcc:gcc curl:curl patch:patch make:make xz:xz-utils; do command -v "${t%%:*}" >/dev/null || need+=("${t#*:}"); done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    . scripts/apt.sh
    apt_retry update -qq
    DEBIAN_FRONTEND=noninteractive apt_retry install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "build-shells-static: missing ${need[*]} (apt-get install them as root)" >&2
    exit 1
  fi
fi

mkdir -p "$DL" "$WORK" "$OUT"
: >"$LOG"
progress "sources: download and verify ($MIRROR)"
echo "$SOURCES" | while read -r name pool sum; do
  [ -n "$name" ] || continue
  f=$DL/$name
  if [ -f "$f" ] && [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$sum" ]; then continue; fi
  curl -fsSL --retry 3 -o "$f.part" "$MIRROR/pool/main/$pool/$name"
  got=$(sha256sum "$f.part" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    echo "build-shells-static: checksum mismatch for $name: got $got, want $sum" >&2
    rm -f "$f.part"
    exit 1
  fi
  mv "$f.part" "$f"
  echo "verified $name $sum" >>"$LOG"
done

# unpack DIR ORIG [DEBIAN]: DIR = upstream tarball + Debian's quilt series applied in order (what dpkg-source -x
# does).
unpack() {
  local d=$WORK/$1 p
  rm -rf "$d" "$d.tmp" && mkdir -p "$d.tmp"
  tar -xf "$DL/$2" -C "$d.tmp"
  mv "$d.tmp"/* "$d" && rmdir "$d.tmp"
  [ -n "${3:-}" ] || return 0
  tar -xf "$DL/$3" -C "$d"
  while IFS= read -r p; do
    case "$p" in '' | '#'*) continue ;; esac
    patch -d "$d" -p1 -s <"$d/debian/patches/${p%% *}"
  done <"$d/debian/patches/series"
}
step "ncurses: unpack" unpack ncurses-6.4 ncurses_6.4.orig.tar.gz
step "bash: unpack, Debian's patch series" unpack bash-5.2.15 bash_5.2.15.orig.tar.gz bash_5.2.15-2.debian.tar.xz
step "zsh: unpack, Debian's patch series" unpack zsh-5.9 zsh_5.9.orig.tar.xz zsh_5.9-4.debian.tar.xz
step "sources: our exec-wrapper patches" sh -c "patch -d '$WORK/bash-5.2.15' -p1 <'$ROOT/patches/bash-5.2.15-exec-wrapper.patch' &&
  patch -d '$WORK/zsh-5.9' -p1 <'$ROOT/patches/zsh-5.9-exec-wrapper.patch' &&
  cp '$ROOT/patches/escalate-client.c' '$WORK/bash-5.2.15/' && cp '$ROOT/patches/escalate-client.c' '$WORK/zsh-5.9/Src/'"

SYSROOT=$WORK/sysroot
jobs=$(nproc)

if [ "$arch" = aarch64 ] && [ -z "${CC_AARCH64:-}" ]; then
  step "musl: unpack" unpack musl-1.2.3 musl_1.2.3.orig.tar.gz
  cd "$WORK/musl-1.2.3"
  step "musl: configure (cross, aarch64-linux-gnu-gcc)" ./configure --target=aarch64-linux-gnu CROSS_COMPILE=aarch64-linux-gnu- \
    --prefix="$WORK/musl" --syslibdir="$WORK/musl/lib" --disable-shared --enable-wrapper=gcc
  step "musl: make" make -j"$jobs"
  step "musl: install into the build folder" make install
fi
export CC CFLAGS="-Os -fno-plt -ffunction-sections -fdata-sections" LDFLAGS="-static -Wl,--gc-sections"

# ncurses: only the terminfo library (libtinfo.a), reading the terminfo database where distributions keep it.
# Both shells only need its termcap functions (tgetent, tgetstr, tputs); zsh's curses module is left out.
cd "$WORK/ncurses-6.4"
step "ncurses: configure" ./configure --build="$(gcc -dumpmachine)" --host="$HOST" --with-build-cc="$BUILD_CC" --prefix="$SYSROOT" --with-termlib --without-shared --without-cxx \
  --without-cxx-binding --without-ada --without-progs --without-tests --without-manpages --without-debug \
  --disable-db-install --without-gpm --disable-widec --enable-termcap --disable-home-terminfo \
  --with-default-terminfo-dir=/usr/share/terminfo \
  --with-terminfo-dirs=/etc/terminfo:/lib/terminfo:/usr/share/terminfo:/usr/lib/terminfo
step "ncurses: make libtinfo" make -j"$jobs" libs
step "ncurses: install into the build sysroot" make install.libs

# bash: its own readline, linked with our libtinfo; no bash malloc (musl's), no NLS. bash 5.2's configure has its
# strtoimax test inverted (a usable libc strtoimax adds bash's own copy, which then clashes with musl's libc.a):
# bash_cv_func_strtoimax=no keeps it out.
cd "$WORK/bash-5.2.15"
step "bash: configure" env bash_cv_func_strtoimax=no CC_FOR_BUILD="$BUILD_CC" CPPFLAGS="-I$SYSROOT/include" \
  LDFLAGS="$LDFLAGS -L$SYSROOT/lib" ./configure --build="$(gcc -dumpmachine)" --host="$HOST" --without-bash-malloc --disable-nls --enable-static-link --with-curses
step "bash: make" make -j"$jobs" bash
install -m 0755 bash "$OUT/bash"

# zsh: every module linked in (--disable-dynamic); the same startup files as Debian's zsh (/etc/zsh).
cd "$WORK/zsh-5.9"
step "zsh: configure" env CPPFLAGS="-I$SYSROOT/include" LDFLAGS="$LDFLAGS -L$SYSROOT/lib" LIBS="-ltinfo" \
  ./configure --build="$(gcc -dumpmachine)" --host="$HOST" --disable-dynamic --with-tcsetpgrp --enable-etcdir=/etc/zsh --disable-gdbm \
  --disable-pcre --disable-cap --with-term-lib=tinfo
# Link in every module that needs no library we lack (configure leaves the optional ones out when not dynamic):
# what Debian's zsh loads on demand (zsh/stat, zsh/system, zsh/zpty, zsh/net/tcp, zsh/regex, zsh/mathfunc, …) is
# in the binary and autoloads the same way. Left out: attr, cap, curses, db/gdbm, pcre (libraries), example.
static_mods="clone datetime deltochar files langinfo mapfile mathfunc nearcolor newuser param/private regex net/socket
  stat system net/tcp watch zftp zprof zpty zselect"
# config.modules is made by make from configure's output: make it first, or make remakes it over the edit.
make config.modules >>"$LOG" 2>&1
for m in $static_mods; do
  sed -i "s|^\(name=zsh/$m .*\)link=no|\1link=static|" config.modules
done
echo "zsh modules linked in: $(grep -c 'link=static' config.modules)" >>"$LOG"
step "zsh: make" make -j"$jobs"
install -m 0755 Src/zsh "$OUT/zsh"

"$STRIP" "$OUT/bash" "$OUT/zsh"
# A static binary asks for no program interpreter (readelf is binutils', which build-essential brings; `file`, used
# here before, is not installed on a fresh machine, so the check passed there without looking).
for k in bash zsh; do
  if readelf -l "$OUT/$k" | grep -q 'program interpreter'; then
    echo "build-shells-static: $OUT/$k is dynamically linked" >&2
    exit 1
  fi
done
echo "$want" >"$STAMP"
summary="built in $(( $(date +%s) - start )) s: ${OUT#"$ROOT"/}/bash ($(stat -c %s "$OUT/bash") bytes), ${OUT#"$ROOT"/}/zsh ($(stat -c %s "$OUT/zsh") bytes)"
run_it=
[ "$arch" = "$(uname -m)" ] || run_it=$(command -v "qemu-$arch" || true) # qemu-user, when installed
if [ "$arch" = "$(uname -m)" ] || [ -n "$run_it" ]; then
  summary="$summary; ${run_it:+under $(basename "$run_it"): }$($run_it "$OUT/bash" -c 'echo bash $BASH_VERSION'), $($run_it "$OUT/zsh" -c 'echo zsh $ZSH_VERSION')"
fi
progress "$summary"
bash "$ROOT/scripts/build-room-launcher.sh" "$arch"
bash "$ROOT/scripts/build-sandbox-exec.sh" "$arch"
