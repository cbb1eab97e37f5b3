#!/usr/bin/env bash
# Run every test: formatting check (Prettier, config in .prettierrc.json), type-check, lint, the fast tier, the clean-root
# npm test (issue 25), then `bun test` (its summary line ends the output). Under CI=true a missing formatter is an
# error, like any missing prerequisite. This is the README's test command: run it before a commit lands.
#
# On every change, run the fast tier instead (issue 33): `node_modules/.bin/bun test test/unit` — pure logic (no
# compiled binary, no kernel sandbox, no patched shell), a few seconds; it includes the docs test (every `docs/…`
# citation resolves, every Markdown table parses) and the layering test (imports follow docs/architecture.md).
#
# The patched shells the suites run are the portable static ones (dist/shells-static/<platform>/, the same files
# the executable carries; test/helpers/shells.ts): the install builds the shells once.
#
# The tests never depend on this machine's HOME or temporary folder: `bun test` runs with a HOME that is new and lies
# under the temporary folder, and a TMPDIR that is new and empty; both are removed afterwards. The HOME and TMPDIR
# this script was started with stay watched by the leftover check (test/helpers/cleanup.ts), which fails the run
# under CI=true when anything is left in /tmp, /var/tmp, either HOME or either TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x node_modules/.bin/prettier ]; then
  node_modules/.bin/prettier --check --log-level warn .
elif [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then
  echo "test.sh: prettier is not installed (npm ci)" >&2
  exit 1
else
  echo "test.sh: SKIP format check: prettier is not installed (npm ci)" >&2
fi
node_modules/.bin/tsc --noEmit -p .
# Lint (issue 42), before the fast tier and not inside it: typescript-eslint's no-floating-promises, type-aware, so it
# builds the whole TypeScript program (~15 s on 2 cores, more than the whole fast tier), then knip (files nothing
# reaches, exports nothing imports, dependencies nothing uses; ~5 s). Config: eslint.config.js, knip.jsonc.
node_modules/.bin/eslint .
node_modules/.bin/knip

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/shellmcp-test.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT
mkdir "$run_dir/home" "$run_dir/tmp"
# bun_test ARGS…: `bun test` with the new HOME and TMPDIR (the leftover check still watches the old ones).
bun_test() {
  SHELLMCP_CHECK_ALSO="${HOME:-}" SHELLMCP_CHECK_TMP="${TMPDIR:-/tmp}" HOME="$run_dir/home" TMPDIR="$run_dir/tmp" \
    node_modules/.bin/bun test --timeout 60000 "$@"
}

# The fast tier first: a broken doc citation or import direction stops the run in seconds.
bun_test test/unit

# Issue 25 (a failure stops here): `npx -y ./shellmcp-<version>.tgz serve` as a non-root user in clean bullseye and
# trixie roots (needs root: mmdebstrap and mount namespaces; roots cached in .cache/clean-roots/).
if [ "$(id -u)" = 0 ]; then
  bash scripts/npm-clean-root.sh
elif [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then
  echo "test.sh: the clean-root npm test needs root" >&2
  exit 1
else
  echo "test.sh: SKIP the clean-root npm test (scripts/npm-clean-root.sh): it needs root" >&2
fi

# Then every test; its summary line ends the output.
status=0
bun_test || status=$?
exit "$status"
