#!/usr/bin/env bash
# Run every test: type-check, then `bun test` (its summary line ends the output).
set -euo pipefail
cd "$(dirname "$0")/.."
node_modules/.bin/tsc --noEmit -p .
exec node_modules/.bin/bun test --timeout 60000
