#!/usr/bin/env bash
# The whole test run: what CI runs and what a newcomer runs after `npm ci`.
# Installs and starts the real components the suites need (PostgreSQL; later Docker),
# builds once, runs every suite, and prints "N passed, N failed" at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

results=$(mktemp -d /tmp/capstan-results.XXXXXX)
export CAPSTAN_TEST_RESULTS=$results
status=0

step() { printf '\n==> %s\n' "$*"; }

run_vitest() { # name, then vitest args; records results, keeps going on failure
  local name=$1; shift
  if ! npx vitest run "$@" --reporter=default --reporter=json --outputFile.json="$results/$name.json"; then
    status=1
  fi
}

step "prisma schemas in sync"
node scripts/prisma-generate.mjs --check

step "build (typecheck, strict)"
npx turbo run build

step "OpenAPI lint"
npm run --silent lint:openapi || status=1

step "unit tests"
run_vitest unit --project unit

step "PostgreSQL for the API suite"
pg_url=$(test/services/postgres.sh start 55432)
trap 'test/services/postgres.sh stop 55432 >/dev/null 2>&1 || true' EXIT

step "API suite on SQLite and on PostgreSQL (in parallel)"
run_vitest api-sqlite --project api &
sqlite_pid=$!
CAPSTAN_TEST_PG_URL=$pg_url run_vitest api-postgresql --project api &
pg_pid=$!
wait $sqlite_pid || status=1
wait $pg_pid || status=1

step "summary"
node scripts/test-summary.mjs "$results" || status=1
exit $status
