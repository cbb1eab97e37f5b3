#!/usr/bin/env bash
# Check that the README's first command works on a fresh machine: build a minimal Debian bookworm root with
# mmdebstrap (variant minbase: no compiler, no Node, no git), copy the committed tree into it (`git archive
# HEAD`, so nothing uncommitted or ignored leaks in), and run `bash scripts/install.sh && bash scripts/demo.sh`
# inside it. With --tests, then also run `bash scripts/test.sh` there with CI=true and a new HOME under /tmp (the
# way .ci/run does; issue 20). Prints the time each phase took.
# The root is entered with a new mount namespace and pivot_root, not chroot: the kernel refuses new user namespaces
# to a chrooted process, and the sandbox suites need them.
# Needs root and network access to deb.debian.org and the npm registry; the root is thrown away afterwards.
#
#   bash scripts/fresh-machine.sh [--tests]
set -euo pipefail
cd "$(dirname "$0")/.."
run_tests=
[ "${1:-}" = "--tests" ] && run_tests=1

export DEBIAN_FRONTEND=noninteractive
if ! command -v mmdebstrap >/dev/null; then
  . scripts/apt.sh
  apt_retry update -qq
  apt_retry install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

tmp=$(mktemp -d /tmp/shellmcp-fresh.XXXXXX)
# Cleanup never crosses into a mount: a mount left under the root (seen once: the host's /proc, read-only, after a
# failed run) is detached first, and rm stays on the root's own file system, so it can never delete from the
# host's /dev, /proc or /sys.
cleanup() {
  { grep -o " $tmp/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
git archive --format=tar --prefix=shellmcp/ HEAD >"$tmp/tree.tar"
# Behind a TLS-inspecting proxy the host trusts an extra CA (NODE_EXTRA_CA_CERTS): hand the same file to npm
# inside the root (a property of this network, not of the machine under test).
ca_env=
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r "$NODE_EXTRA_CA_CERTS" ]; then
  mkdir -p "$tmp/ca/shellmcp-host-ca" && cp "$NODE_EXTRA_CA_CERTS" "$tmp/ca/shellmcp-host-ca/ca.crt"
  tar -C "$tmp/ca" -cf "$tmp/ca.tar" shellmcp-host-ca
  ca_env="NODE_EXTRA_CA_CERTS=/root/shellmcp-host-ca/ca.crt"
fi

inside='set -e; cd /root/shellmcp; s=$(date +%s)
bash scripts/install.sh
m=$(date +%s); echo "fresh-machine: install.sh took $((m - s)) s"
bash scripts/demo.sh | grep -q "hello from shellmcp" || { echo "fresh-machine: demo.sh gave no shell output" >&2; exit 1; }
e=$(date +%s); echo "fresh-machine: demo.sh took $((e - m)) s"'
if [ -n "$run_tests" ]; then
  inside="$inside"'
export HOME=$(mktemp -d /tmp/fresh-home.XXXXXX); CI=true bash scripts/test.sh
echo "fresh-machine: test.sh took $(( $(date +%s) - e )) s"'
fi

start=$(date +%s)
mmdebstrap --quiet --mode=root --variant=minbase \
  --customize-hook='echo "fresh-machine: base root ready"' \
  --customize-hook="tar-in $tmp/tree.tar /root" \
  ${ca_env:+--customize-hook="tar-in $tmp/ca.tar /root"} \
  bookworm "$tmp/root" http://deb.debian.org/debian
# Enter it with a new mount namespace and pivot_root (no chroot, no bwrap: a chrooted process may not create user
# namespaces, and bwrap would set no_new_privs and give it a /proc a nested sandbox cannot remount), with the host's
# /dev, /proc, /sys (its cgroup tree: per-call cgroups), name resolution and network.
unshare --mount --propagation private -- /bin/sh -ec '
  r="$1"; shift
  mount --rbind "$r" "$r"
  for d in dev proc sys; do mount --rbind "/$d" "$r/$d"; done
  mount --bind /etc/resolv.conf "$r/etc/resolv.conf"
  cd "$r"; mkdir -p .oldroot; pivot_root . .oldroot; cd /
  umount -l /.oldroot; rmdir /.oldroot
  exec "$@"' fresh-root "$tmp/root" \
  /usr/bin/env -i $ca_env HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb bash -c "$inside"
echo "fresh-machine: passed in $(( $(date +%s) - start )) s"
