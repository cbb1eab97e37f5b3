#!/usr/bin/env bash
# The npm install as a new user meets it (issue 25): in clean Debian roots with no Bun, no compiler and no apt
# access (mmdebstrap minbase plus Debian's nodejs and npm, for npx), a non-root user runs
#
#     npx -y ./shellmcp-<version>.tgz serve --sandbox workspace-write
#
# under a minimal MCP client (scripts/clean-root/mcp-client.cjs): initialize, tools/list, then one `shell` call
# whose output must show a rule's denial (`rm`: forbidden), an escalated program (`node`: allowed, so it runs in
# its escalation room, where the network is on) beside the same program kept in the sandbox (`env node`: the
# seccomp filter refuses its socket), and the sandbox refusing a write outside the workspace.
#
# Roots (cached in .cache/clean-roots/, built once with mmdebstrap from deb.debian.org: measured 31 s for bullseye,
# 94 s for trixie with bubblewrap):
#   bullseye  glibc 2.31, Node.js 12, npm 7; no bubblewrap: the server falls back to Landlock and says so
#   trixie    glibc 2.41, Node.js 20, npm 9; with bubblewrap
# The launcher's optionalDependencies (@shellmcp/<target>) are served from dist/release/ by a local registry on
# 127.0.0.1 (scripts/clean-root/registry.cjs): the same resolution npm does against the public registry, which is
# not used. The release artifacts are built first (`bun build.ts --release`, linux-x64 only).
#
#   bash scripts/npm-clean-root.sh [bullseye] [trixie]     (default: both)
#
# Needs root (mmdebstrap, entering the roots). Each root is entered with a new mount namespace and pivot_root, like
# scripts/fresh-machine.sh (a chrooted process may not create the user namespaces the sandbox needs). Leaves nothing
# outside .cache/clean-roots/ (the run's files and the user's HOME live inside the root and are reset each run).
# Prints each root's time and the server's answers.
set -euo pipefail
trap 'echo "npm-clean-root: failed (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache/clean-roots
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suites=("$@")
[ "${#suites[@]}" -gt 0 ] || suites=(bullseye trixie)
VERSION=$(node -p 'require("./package.json").version')
REL=$ROOT/dist/release
TESTER_UID=1000

if [ "$(id -u)" != 0 ]; then
  echo "npm-clean-root: needs root (mmdebstrap, mount namespaces)" >&2
  exit 1
fi
mkdir -p "$CACHE/tmp"
# mmdebstrap and npm's temporary files stay in the cache folder, never in /tmp.
export TMPDIR=$CACHE/tmp

if ! command -v mmdebstrap >/dev/null; then
  . scripts/apt.sh
  apt_retry update -qq
  DEBIAN_FRONTEND=noninteractive apt_retry install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

# The artifacts under test are built from this tree each run (~20 s), unless SHELLMCP_CLEAN_ROOT_REUSE=1 and they
# exist.
if [ "${SHELLMCP_CLEAN_ROOT_REUSE:-0}" != 1 ] || [ ! -f "$REL/shellmcp-$VERSION.tgz" ] || [ ! -f "$REL/shellmcp-linux-x64-$VERSION.tgz" ]; then
  echo "npm-clean-root: building the release artifacts (linux-x64)"
  bash scripts/build-shells-static.sh
  SHELLMCP_RELEASE_TARGETS=linux-x64 node_modules/.bin/bun build.ts --release >/dev/null
fi

# make_root SUITE EXTRA_PACKAGES: the cached root .cache/clean-roots/SUITE (built once).
make_root() {
  local suite=$1 extra=$2 dir=$CACHE/$1 t0
  [ -f "$dir/.complete" ] && return 0
  rm -rf "$dir" "$dir.part"
  t0=$(date +%s)
  echo "npm-clean-root: building the $suite root (mmdebstrap minbase + nodejs npm $extra)"
  mmdebstrap --quiet --mode=root --variant=minbase --include="nodejs,npm${extra:+,$extra}" \
    --customize-hook="chroot \"\$1\" useradd --create-home --uid $TESTER_UID --shell /bin/bash tester" \
    "$suite" "$dir.part" "$MIRROR"
  touch "$dir.part/.complete"
  mv "$dir.part" "$dir"
  echo "npm-clean-root: $suite root built in $(( $(date +%s) - t0 )) s"
}

# The test, run inside the root as the user `tester` (no root, no compiler, no Bun, no apt).
INSIDE='set -e
cd ~/work
node --version; npm --version
ldd --version | head -n 1
command -v bwrap || echo "bubblewrap: not installed"
for p in bun cc gcc; do if command -v $p >/dev/null; then echo "unexpected: $p is installed" >&2; exit 1; fi; done
export SHELL_COMMAND="rm -f x; echo \"rm exit \$?\"; node /opt/shellmcp-test/net.cjs; env node /opt/shellmcp-test/net.cjs; touch ~/outside.txt; echo \"touch exit \$?\""
node /opt/shellmcp-test/mcp-client.cjs npx -y "./shellmcp-$VERSION.tgz" serve --sandbox workspace-write'

# run_root SUITE: reset the user's HOME in the root, copy the package and the client in, serve the platform
# packages, run $INSIDE as tester, check the answers. Sets $out.
run_root() {
  local suite=$1 dir=$CACHE/$1 home port reg t0 status=0
  home=$dir/home/tester
  rm -rf "$home" "$dir/opt/shellmcp-test" "$dir/tmp/"* "$dir/var/tmp/"*
  mkdir -p "$home/work" "$home/.codex/rules" "$dir/opt/shellmcp-test"
  cp "$REL/shellmcp-$VERSION.tgz" "$home/work/"
  cp scripts/clean-root/mcp-client.cjs scripts/clean-root/net.cjs "$dir/opt/shellmcp-test/"
  cat >"$home/.codex/rules/default.rules" <<'RULES'
prefix_rule(pattern=["rm"], decision="forbidden")
prefix_rule(pattern=["node"], decision="allow")
RULES
  # A room has the call's own network unless granted more (issue 30): the allowed node is granted the host's.
  printf '[shellmcp.room_network]\nnode = "host"\n' >"$home/.codex/config.toml"
  chown -R "$TESTER_UID:$TESTER_UID" "$home"
  out=$CACHE/$suite.out
  # The local registry (on the host; the root shares its network).
  node scripts/clean-root/registry.cjs "$REL" "$VERSION" >"$CACHE/registry.port" &
  reg=$!
  for _ in $(seq 1 50); do [ -s "$CACHE/registry.port" ] && break; sleep 0.1; done
  port=$(cat "$CACHE/registry.port")
  t0=$(date +%s%N)
  unshare --mount --propagation private -- /bin/sh -ec '
    r="$1"; shift
    mount --rbind "$r" "$r"
    for d in dev proc sys; do mount --rbind "/$d" "$r/$d"; done
    cd "$r"; mkdir -p .oldroot; pivot_root . .oldroot; cd /
    umount -l /.oldroot; rmdir /.oldroot
    exec "$@"' clean-root "$dir" \
    /usr/bin/setpriv --reuid=$TESTER_UID --regid=$TESTER_UID --init-groups \
    /usr/bin/env -i HOME=/home/tester USER=tester LOGNAME=tester PATH=/usr/local/bin:/usr/bin:/bin TERM=dumb \
    VERSION="$VERSION" npm_config_registry="http://127.0.0.1:$port/" npm_config_audit=false npm_config_fund=false \
    npm_config_update_notifier=false /bin/bash -c "$INSIDE" >"$out" 2>&1 || status=$?
  elapsed_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  kill "$reg" 2>/dev/null || true
  wait "$reg" 2>/dev/null || true
  rm -f "$CACHE/registry.port" "$dir/.oldroot" 2>/dev/null || true
  rmdir "$dir/.oldroot" 2>/dev/null || true
  return "$status"
}

# check SUITE PATTERN WHAT: the run's output must match PATTERN (grep -E).
check() {
  if ! grep -qE "$2" "$out"; then
    echo "npm-clean-root: $1: FAILED: $3 (no match for /$2/); the run's output:" >&2
    cat "$out" >&2
    exit 1
  fi
}

total=0
for suite in "${suites[@]}"; do
  case "$suite" in
    bullseye) make_root bullseye "" ;;
    trixie) make_root trixie bubblewrap ;;
    *) echo "npm-clean-root: unknown suite $suite (bullseye, trixie)" >&2; exit 2 ;;
  esac
  status=0
  run_root "$suite" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "npm-clean-root: $suite: FAILED (exit status $status); the run's output:" >&2
    cat "$out" >&2
    exit 1
  fi
  check "$suite" '^initialize \{"name":"shellmcp"' "initialize answered"
  check "$suite" '^tools/list \["shell"' "tools/list lists shell first"
  check "$suite" 'Execution denied: Execution forbidden by policy' "rm denied by its rule"
  check "$suite" 'escalated \{"file":"/usr/bin/node"' "node escalated (server log)"
  check "$suite" 'network: connected' "the escalated node, granted the host's network, reached it"
  check "$suite" 'network: E(PERM|ACCES|CONNREFUSED)' "node kept in the sandbox did not reach the host's loopback"
  check "$suite" "touch: cannot touch '/home/tester/outside.txt': (Read-only file system|Permission denied)" "write outside refused"
  if [ "$suite" = bullseye ]; then
    check "$suite" 'bubblewrap is not installed.*Landlock' "the Landlock fallback was announced"
    check "$suite" '"room":"landlock"' "node escalated into a Landlock room"
  else
    check "$suite" '"room":"bwrap"' "node escalated into a bubblewrap room"
  fi
  echo "npm-clean-root: $suite passed in $elapsed_ms ms (npx install, serve, three requests)"
  sed -n '/^v[0-9]/p;/^ldd/p;/^initialize/p;/^tools\/list/p' "$out" | sed "s/^/  $suite: /"
  grep '^tools/call' "$out" | cut -c1-2000 | sed "s/^/  $suite: /"
  total=$((total + elapsed_ms))
done
rm -rf "$CACHE/tmp"
echo "npm-clean-root: passed: ${suites[*]} (${total} ms in all, roots cached in .cache/clean-roots/)"
