#!/usr/bin/env bash
# The whole test run: what CI runs and what a newcomer runs after `npm ci`.
# Installs and starts the real components the suites need (PostgreSQL, a Docker Engine,
# local images, test hosts), builds once, runs every suite, and ends with
# "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."

results=$(mktemp -d /tmp/capstan-results.XXXXXX)
status=0

step() { printf '\n==> %s  (%ss)\n' "$*" "$SECONDS"; }

run_vitest() { # name, then vitest args; records results; fails when the suite fails
  local name=$1; shift
  npx vitest run "$@" --reporter=default --reporter=json --outputFile.json="$results/$name.json"
}

step "prisma schemas in sync"
node scripts/prisma-generate.mjs --check

step "build (strict TypeScript)"
npx turbo run build

step "typecheck of the unit tests, end-to-end tests and benchmarks (strict TypeScript, like the code)"
npm run --silent typecheck || status=1

step "OpenAPI lint"
npm run --silent lint:openapi || status=1

# The engine-bound suites: a Docker Engine, base images and the agent image (minutes on a fresh
# machine, mostly waiting on Debian's archive), then the suites that use them. They mostly wait
# on the engine, so they run beside the API suites, which keep both cores busy (below).
engine_suites() {
  local failed=0
  step "preparing Docker infrastructure (log: $results/infra.log)"
  if ! bash test/kit/prepare.sh >"$results/infra.log" 2>&1; then
    tail -n 40 "$results/infra.log"
    echo "Docker infrastructure could not be prepared" >&2
    return 1
  fi
  step "unit tests (the agent's engine tests use the real engine)"
  # The engine is there now: a unit test file that cannot reach it fails instead of skipping.
  CAPSTAN_TEST_REQUIRE_ENGINE=1 run_vitest unit --project unit || failed=1
  step "end-to-end suite on real Docker hosts"
  run_vitest e2e --project e2e || failed=1
  # ---- dashboard (issue 22) ----
  step "Chromium from Debian for the browser suite (when missing)"
  bash test/services/chromium.sh || failed=1
  step "browser suite: the dashboard in headless Chromium (screenshots: test/browser/screenshots/)"
  run_vitest browser --project browser || failed=1
  step "engine-bound suites done"
  return $failed
}
engine_suites &
engine_pid=$!

step "PostgreSQL for the API suite"
pg_port=${CAPSTAN_TEST_PG_PORT:-55432}
pg_url=$(test/services/postgres.sh start "$pg_port")
trap 'test/services/postgres.sh stop "$pg_port" >/dev/null 2>&1 || true; bash test/kit/cleanup.sh >/dev/null 2>&1 || true' EXIT

# The suites start their own PowerDNS, Knot and registry servers (test/services/); installing
# them once here keeps the two parallel API runs from both running apt-get.
step "DNS servers and a container registry for the API suite (PowerDNS, Knot, docker-registry)"
test/services/powerdns.sh install
test/services/knot.sh install
test/services/registry.sh install

# Niced: the engine-bound suites (whose containers run at the engine's priority) get the CPU
# when they need it, and the API suites soak up the rest. Every API file runs on both databases
# except the three whole-route-table matrices, which run on one each (they test the HTTP layer's
# checks, the same code on either database; CONTRIBUTING.md, "CI time"): the authorization
# matrix on PostgreSQL (its permission reads are SQL of their own), the cross-team matrix and the
# CLI's process-per-command tests on SQLite. The route fuzz runs on both.
step "API suites on SQLite and on PostgreSQL (in parallel, beside the engine-bound suites)"
(renice -n 10 -p $BASHPID >/dev/null && run_vitest api-sqlite --project api --exclude test/api/authz-matrix.test.ts) &
sqlite_pid=$!
(renice -n 10 -p $BASHPID >/dev/null && CAPSTAN_TEST_PG_URL=$pg_url run_vitest api-postgresql --project api --exclude test/api/cross-team.test.ts --exclude test/api/cli.test.ts) &
pg_pid=$!

wait $sqlite_pid || status=1
step "API suite on SQLite done"
wait $pg_pid || status=1
step "API suite on PostgreSQL done"
wait $engine_pid || status=1

step "summary"
node scripts/test-summary.mjs "$results" || status=1
exit $status
