#!/usr/bin/env bash
# Runs the SDK's tests against the real server and PostgreSQL. Needs the
# workspace binaries (`cargo build --workspace --bins`) and Node >= 20.
set -euo pipefail
cd "$(dirname "$0")"
# Install exactly the locked dependencies when node_modules is missing or
# older than the lockfile.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
exec node --test --test-reporter="${NODE_TEST_REPORTER:-spec}" test/*.test.js
