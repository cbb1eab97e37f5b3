#!/usr/bin/env bash
# Run every test: formatting check (Prettier, config in .prettierrc.json), type-check, then `bun test` (its summary
# line ends the output). Under CI=true a missing formatter is an error, like any missing prerequisite.
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
exec node_modules/.bin/bun test --timeout 60000
