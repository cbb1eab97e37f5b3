# Sourced by install.sh, build-shells.sh and check-build-deps.sh: the Debian packages shellmcp needs, and apt helpers.
#
# SHELL_BUILD_PKGS: what scripts/build-shells-static.sh needs to build the patched shells the executable carries
#   (static, musl; the install builds only these: the tests, the walkthrough and `serve` run them too): a C
#   toolchain (build-essential: gcc, make, libc headers for the build-time helpers), musl-tools (musl-gcc), patch,
#   xz-utils (the .debian.tar.xz), autoconf (Debian's zsh patches touch aczsh.m4, so zsh's Makefile reruns
#   autoconf); the sources come with curl (in RUN_PKGS). Not bison: bash ships its parser pre-generated and
#   neither Debian patch set touches parse.y. Not libncurses-dev: the static build makes its own libtinfo.
# DEBIAN_SHELL_BUILD_PKGS: what the optional Debian-linked build (scripts/build-shells.sh, into dist/shells/) needs
#   on top: dpkg-dev (`apt-get source` unpacks with dpkg-source) and libncurses-dev (both shells link a terminal
#   library). The install does not run that build.
# RUN_PKGS: what the binary and the tests use at run time: bubblewrap (the bwrap backend), zsh and git (the
#   agent-session test), python3, strace, procps, curl, ca-certificates (npm and curl over https), iproute2 (`ip`:
#   the real-client npm scenario gives serve a network namespace with an address of its own), python3-fusepy (a
#   FUSE filesystem whose daemon, not the mode bits, decides access: test/sandbox/foreign-private-repo.test.ts).
# Node and npm (for `npm ci`, which brings Bun) come from Debian's nodejs/npm when `node`/`npm` are missing.
# scripts/check-build-deps.sh checks SHELL_BUILD_PKGS against the programs the static shell build really runs.
SHELL_BUILD_PKGS=(build-essential musl-tools autoconf patch xz-utils)
DEBIAN_SHELL_BUILD_PKGS=("${SHELL_BUILD_PKGS[@]}" dpkg-dev libncurses-dev)
# SHELL_BUILD_OPTIONAL_PKGS: tools the build runs when they are there and does without otherwise (not installed;
# a clean-root build without them passes, scripts/fresh-machine.sh): gettext (bash's po/ targets), man-db and
# bsdextrautils (`man`, `col`: zsh's documentation), file (a configure script runs `file conftest` when it is
# there). scripts/check-build-deps.sh accepts them.
SHELL_BUILD_OPTIONAL_PKGS=(gettext man-db bsdextrautils file)
RUN_PKGS=(bubblewrap git zsh curl ca-certificates python3 strace procps iproute2 python3-fusepy)
# IMAGE_PKGS: what scripts/build-image.sh and test/deploy/ use (not installed by install.sh; `apt-get install
#   --no-install-recommends "${IMAGE_PKGS[@]}"`, ~25 s here): mmdebstrap (the image's Debian base), podman (loads the
#   built archive in test/deploy/image.test.ts), runsc (gVisor, for the runtime table of docs/deploy.md). kubectl
#   (renders deploy/kubernetes/ in test/deploy/manifests.test.ts) is not in Debian bookworm: Kubernetes' own apt
#   repository (pkgs.k8s.io) or Google Cloud's has it.
IMAGE_PKGS=(mmdebstrap podman runsc)

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
