#!/usr/bin/env bash
# Run the shell, escalation and differential suites with the portable shells (dist/shells-static/<platform>/, built
# by scripts/build-shells-static.sh) in place of the Debian-built ones (issue 25). The tests find the patched shells
# at dist/shells/ (test/helpers/shells.ts), and `serve` of dist/shellmcp finds them beside itself, so for this run
# dist/shells/ holds copies of the portable ones; the Debian-built shells are set aside in dist/shells.debian/ and put
# back when the run ends, however it ends (a run that was killed is repaired by the next one).
#
#   bash scripts/test-portable-shells.sh [bun test file or folder…]
#   (default: test/shells test/escalate test/e2e/portable.test.ts test/mcp/serve.test.ts test/security/room.test.ts)
#
# Like scripts/test.sh: a new HOME and TMPDIR for `bun test`, removed afterwards; CI=true passes through.
set -euo pipefail
cd "$(dirname "$0")/.."
platform=linux-$(uname -m | sed 's/x86_64/x64/; s/aarch64/arm64/')
static=dist/shells-static/$platform
suites=("$@")
[ "${#suites[@]}" -gt 0 ] ||
  suites=(test/shells test/escalate test/e2e/portable.test.ts test/mcp/serve.test.ts test/security/room.test.ts)

[ -x "$static/bash" ] && [ -x "$static/zsh" ] || bash scripts/build-shells-static.sh
# The binary must carry the same shells (test/e2e/portable.test.ts checks it): rebuilding is cheap (~2 s).
node_modules/.bin/bun build.ts >/dev/null

restore() {
  if [ -d dist/shells.debian ]; then
    rm -rf dist/shells
    mv dist/shells.debian dist/shells
  fi
}
restore # a run that was killed left the Debian-built shells aside
trap 'restore; rm -rf "${run_dir:-}"' EXIT
if [ -d dist/shells ]; then mv dist/shells dist/shells.debian; fi
mkdir dist/shells
install -m 0755 "$static/bash" "$static/zsh" dist/shells/
echo "test-portable-shells: dist/shells/ now holds $("dist/shells/bash" -c 'echo bash $BASH_VERSION') and $("dist/shells/zsh" -c 'echo zsh $ZSH_VERSION') (static, musl)"

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/shellmcp-test.XXXXXX")
mkdir "$run_dir/home" "$run_dir/tmp"
SHELLMCP_CHECK_ALSO="${HOME:-}" SHELLMCP_CHECK_TMP="${TMPDIR:-/tmp}" HOME="$run_dir/home" TMPDIR="$run_dir/tmp" \
  node_modules/.bin/bun test --timeout 60000 "${suites[@]}"
