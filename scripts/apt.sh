# Sourced by install.sh and build-shells.sh: the Debian packages shellmcp needs, and apt helpers.
#
# SHELL_BUILD_PKGS: what scripts/build-shells.sh needs to fetch and build the patched shells from Debian's
#   source packages: a C toolchain (build-essential), dpkg-dev (`apt-get source` unpacks with dpkg-source),
#   patch, xz-utils (the .debian.tar.xz), autoconf (Debian's zsh patches touch aczsh.m4, so zsh's Makefile
#   reruns autoconf), libncurses-dev (both shells link a terminal library). Not bison: bash ships its parser
#   pre-generated and neither Debian patch set touches parse.y.
# RUN_PKGS: what the binary and the tests use at run time: bubblewrap (the bwrap backend), zsh and git (the
#   agent-session test), python3, strace, procps, curl, ca-certificates (npm and curl over https).
# Node and npm (for `npm ci`, which brings Bun) come from Debian's nodejs/npm when `node`/`npm` are missing.
# scripts/check-build-deps.sh checks SHELL_BUILD_PKGS against the programs the shell build really runs.
SHELL_BUILD_PKGS=(build-essential autoconf dpkg-dev patch xz-utils libncurses-dev)
# SHELL_BUILD_OPTIONAL_PKGS: tools the build runs when they are there and does without otherwise (not installed;
# a clean-root build without them passes, scripts/fresh-machine.sh): gettext (bash's po/ targets), man-db and
# bsdextrautils (`man`, `col`: zsh's documentation). scripts/check-build-deps.sh accepts them.
SHELL_BUILD_OPTIONAL_PKGS=(gettext man-db bsdextrautils)
RUN_PKGS=(bubblewrap git zsh curl ca-certificates python3 strace procps)

# apt_retry ARGS…: apt-get that waits for the dpkg lock, and retries when another apt holds the lists lock
# (which DPkg::Lock::Timeout does not cover).
apt_retry() {
  local i
  for i in $(seq 1 60); do
    apt-get -o DPkg::Lock::Timeout=300 "$@" && return 0
    sleep 5
  done
  return 1
}

# missing_pkgs PKG…: prints the packages among PKG… that are not installed, one per line.
missing_pkgs() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || printf '%s\n' "$p"
  done
}
