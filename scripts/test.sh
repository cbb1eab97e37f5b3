#!/usr/bin/env bash
# Run every test: formatting check (Prettier, config in .prettierrc.json), type-check, then `bun test` (its summary
# line ends the output). Under CI=true a missing formatter is an error, like any missing prerequisite.
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

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/shellmcp-test.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT
mkdir "$run_dir/home" "$run_dir/tmp"
status=0
SHELLMCP_CHECK_ALSO="${HOME:-}" SHELLMCP_CHECK_TMP="${TMPDIR:-/tmp}" HOME="$run_dir/home" TMPDIR="$run_dir/tmp" \
  node_modules/.bin/bun test --timeout 60000 || status=$?
exit "$status"
