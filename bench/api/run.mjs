// `npm run bench:api`: our GET endpoints against a bare express app serving the same bytes.
//
// 1. Starts a real control plane in a child process (control-plane.ts: createInstance on
//    SQLite in a temp dir, rate limit raised, logs silent) and seeds BENCH_PROJECTS (1,000)
//    projects for the root team through the API.
// 2. Captures our JSON response for each scenario and starts a bare express app in a second
//    child process (bare.mjs) that serves exactly those bodies.
// 3. For each scenario, sequentially: warm up and measure ours, then the same for bare, with
//    autocannon in this process (same connections, same duration, loopback only).
// 4. Prints requests/s, p99 latency and the ratio ours/bare (target >= 0.5), plus each
//    server's CPU time per request, which other load on the machine disturbs far less.
//
// Options (environment): BENCH_DURATION seconds per measurement (default 10, max 60),
// BENCH_CONNECTIONS (default 10), BENCH_WARMUP seconds (default 2), BENCH_PROJECTS (1000),
// BENCH_ROUNDS alternating ours/bare rounds per scenario, medians reported (default 1),
// BENCH_SCENARIOS comma list of list,page100,page,one (default all). BENCH_CACHE=off turns the
// control plane's response cache off, to measure the uncached path.
// BENCH_EXPERIMENTS=stmt-cache,token-cache,memory-limit,project-index measures "ours" with bench-only
// patches that model the proposed fixes (experiments.ts); the product code is unchanged.
// Flags: --profile records a V8 CPU profile of the control plane during each measured run
// (bench/api/profiles/<scenario>.cpuprofile, open in Chrome DevTools) and prints where its
// time went (implies --breakdown); --breakdown times each phase of one request (token lookup,
// rate limiter, handler, JSON) on the live instance; --assert exits 1 when a ratio is below
// the target.
import { fork } from "node:child_process";
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { summarizeProfile } from "./profile-summary.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const bounded = (name, fallback, min, max) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(v) || v < min || v > max) throw new Error(`${name} must be between ${min} and ${max}`);
  return v;
};
const DURATION = bounded("BENCH_DURATION", 10, 1, 60);
const CONNECTIONS = bounded("BENCH_CONNECTIONS", 10, 1, 256);
const WARMUP = bounded("BENCH_WARMUP", 2, 0, 30);
const PROJECTS = bounded("BENCH_PROJECTS", 1000, 1, 100_000);
const ROUNDS = bounded("BENCH_ROUNDS", 1, 1, 10);
const TARGET = 0.5;
const PROFILE = process.argv.includes("--profile");
const ASSERT = process.argv.includes("--assert");
const BREAKDOWN = PROFILE || process.argv.includes("--breakdown");

const ALL_SCENARIOS = {
  list: { path: "/api/v1/projects", what: `GET /projects, all ${PROJECTS} projects (spec default: no pagination)` },
  page100: { path: "/api/v1/projects?page=1&per_page=100", what: "GET /projects?page=1&per_page=100 (largest page)" },
  page: { path: "/api/v1/projects?page=1&per_page=15", what: "GET /projects?page=1&per_page=15" },
  one: { path: "/api/v1/projects/{first}", what: "GET /projects/{uuid}" },
};
const names = (process.env.BENCH_SCENARIOS ?? "list,page100,page,one").split(",").map((s) => s.trim()).filter(Boolean);
for (const n of names) if (!ALL_SCENARIOS[n]) throw new Error(`unknown scenario ${n}; use ${Object.keys(ALL_SCENARIOS).join(", ")}`);

const children = [];
const stopAll = () => children.forEach((c) => c.connected && c.send({ type: "stop" }));
process.on("SIGINT", () => {
  stopAll();
  process.exit(130);
});

function start(file, { execArgv = [], env = {} } = {}) {
  const child = fork(join(here, file), [], {
    execArgv,
    env: { ...process.env, NODE_ENV: "production", ...env },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  children.push(child);
  const nextMessage = (type) =>
    new Promise((resolve, reject) => {
      const onMsg = (m) => {
        if (m?.type === type) {
          child.off("message", onMsg);
          child.off("exit", onExit);
          resolve(m);
        }
      };
      const onExit = (code) => reject(new Error(`${file} exited with ${code} before "${type}"`));
      child.on("message", onMsg);
      child.once("exit", onExit);
    });
  return { child, nextMessage };
}

async function load(url, headers, seconds) {
  const r = await autocannon({ url, headers, connections: CONNECTIONS, pipelining: 1, duration: seconds, method: "GET" });
  if (r.errors || r.timeouts || r.non2xx) {
    throw new Error(`${url}: ${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx responses`);
  }
  return r;
}

async function measure(server, url, headers, profileFile) {
  if (WARMUP) await load(url, headers, WARMUP);
  if (profileFile) {
    server.child.send({ type: "profile-start" });
    await server.nextMessage("profiling");
  }
  server.child.send({ type: "cpu-reset" });
  const r = await load(url, headers, DURATION);
  server.child.send({ type: "cpu-read" });
  const { share, cache } = await server.nextMessage("cpu");
  if (cache) console.log(`    response cache (${cache.state}): ${fmt(cache.hits)} hits, ${fmt(cache.misses)} misses`);
  if (profileFile) {
    server.child.send({ type: "profile-stop", file: profileFile });
    await server.nextMessage("profiled");
  }
  const cpuUs = (share * DURATION * 1e6) / r.requests.total;
  return { rps: r.requests.average, p99: r.latency.p99, p50: r.latency.p50, bytes: r.throughput.average, total: r.requests.total, cpu: share, cpuUs };
}

const fmt = (n, d = 0) => n.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
/** Per field median over the rounds. */
const medianRun = (runs) => Object.fromEntries(Object.keys(runs[0]).map((k) => [k, median(runs.map((r) => r[k]))]));

const profileDir = join(here, "profiles");
const t0 = Date.now();
const experiments = (process.env.BENCH_EXPERIMENTS ?? "").split(",").filter(Boolean);
if (experiments.length) {
  console.log(`EXPERIMENT: "ours" runs with bench-only patches (${experiments.join(", ")}); see bench/api/experiments.ts.`);
}
console.log(`Starting the control plane and seeding ${PROJECTS} projects...`);
console.log(`  response cache ${process.env.BENCH_CACHE === "off" ? "OFF (BENCH_CACHE=off): every request reads the database" : "on (BENCH_CACHE=off measures without it)"}`);
if (PROFILE) mkdirSync(profileDir, { recursive: true });
const ours = start("control-plane.ts", {
  execArgv: ["--import", join(here, "register.mjs")],
  env: { BENCH_PROJECTS: String(PROJECTS), BENCH_PATHS: JSON.stringify(names.map((n) => ALL_SCENARIOS[n].path)) },
});
const ready = await ours.nextMessage("ready");
console.log(`  ready in ${((Date.now() - t0) / 1000).toFixed(1)} s at ${ready.url}`);
// With --profile the baseline is profiled too, over its whole life (every scenario, warm-ups
// included), for comparison: bench/api/profiles/bare.cpuprofile.
const bare = start("bare.mjs", { execArgv: PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`, "--cpu-prof-name=bare.cpuprofile"] : [] });
bare.child.send({ type: "bodies", bodies: ready.bodies });
const bareReady = await bare.nextMessage("ready");

const auth = { Authorization: `Bearer ${ready.token}`, Accept: "application/json" };
const rows = [];
try {
  for (const [i, name] of names.entries()) {
    const path = ready.paths[i];
    if (ready.failures[path]) {
      console.log(`\n${name}: ${ALL_SCENARIOS[name].what}\n  FAILED: our API answered ${ready.failures[path]}`);
      rows.push({ name, failed: ready.failures[path].slice(0, 3) });
      continue;
    }
    const size = JSON.stringify(ready.bodies[path]).length;
    console.log(`\n${name}: ${ALL_SCENARIOS[name].what} (${(size / 1024).toFixed(1)} KiB body)`);
    const sql = ready.statements[path];
    console.log(`  one request of ours runs ${sql.reduce((n, s) => n + s.count, 0)} SQL statements:`);
    for (const s of sql) console.log(`    ${s.count > 1 ? s.count + " x " : ""}${s.sql.replace(/\s+/g, " ").slice(0, 150)}`);
    if (BREAKDOWN) {
      ours.child.send({ type: "breakdown", path });
      const { phases } = await ours.nextMessage("breakdown");
      console.log("  one request of ours, phase by phase (µs, one call at a time):");
      let sum = 0;
      for (const p of phases) {
        if (!p.phase.startsWith("(")) sum += p.us;
        console.log(`    ${fmt(p.us).padStart(6)}  ${p.phase}`);
      }
      console.log(`    ${fmt(sum).padStart(6)}  sum of the request's phases (before HTTP, express routing and logging)`);
    }
    const os = [];
    const bs = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const tag = ROUNDS > 1 ? ` (round ${round}/${ROUNDS})` : "";
      console.log(`  ours${tag}: ${WARMUP} s warm-up + ${DURATION} s, ${CONNECTIONS} connections...`);
      const profile = PROFILE && round === 1 ? join(profileDir, `${name}.cpuprofile`) : null;
      os.push(await measure(ours, ready.url + path, auth, profile));
      console.log(`  bare${tag}: ${WARMUP} s warm-up + ${DURATION} s, ${CONNECTIONS} connections...`);
      bs.push(await measure(bare, bareReady.url + path, auth));
      if (ROUNDS > 1) console.log(`    ours ${fmt(os.at(-1).rps)} req/s, bare ${fmt(bs.at(-1).rps)} req/s, ratio ${fmt(os.at(-1).rps / bs.at(-1).rps, 2)}`);
    }
    const o = medianRun(os);
    const b = medianRun(bs);
    rows.push({
      name,
      size,
      o,
      b,
      ratio: median(os.map((x, i) => x.rps / bs[i].rps)),
      cpuRatio: median(os.map((x, i) => bs[i].cpuUs / x.cpuUs)),
    });
  }
} finally {
  stopAll();
}

const rounds = ROUNDS > 1 ? `, median of ${ROUNDS} alternating rounds` : "";
console.log(`\nResults (${CONNECTIONS} connections, ${DURATION} s each${rounds}, loopback, Node ${process.version}):\n`);
console.log("scenario  body KiB | ours req/s  p99 ms  CPU  µs/req | bare req/s  p99 ms  CPU  µs/req | ours/bare req/s  by CPU µs");
for (const r of rows) {
  if (r.failed) {
    console.log(`${r.name.padEnd(8)} our API failed with HTTP ${r.failed}: not measured`);
    continue;
  }
  const side = (x) => [fmt(x.rps).padStart(10), fmt(x.p99).padStart(7), `${fmt(x.cpu * 100)}%`.padStart(4), fmt(x.cpuUs).padStart(7)].join(" ");
  console.log(
    [
      r.name.padEnd(8),
      fmt(r.size / 1024, 1).padStart(9),
      "|",
      side(r.o),
      "|",
      side(r.b),
      "|",
      `${fmt(r.ratio, 2)}${r.ratio >= TARGET ? "" : "*"}`.padStart(15),
      fmt(r.cpuRatio, 2).padStart(9),
    ].join(" "),
  );
}
console.log(
  `\nTarget: ours/bare >= ${TARGET}; * marks a scenario below it. "CPU" is the server process's CPU time over the` +
    `\nrun's wall time; "by CPU µs" compares CPU time per request (bare/ours), which other load on the machine` +
    `\naffects far less than requests/s does.`,
);

if (PROFILE) {
  for (const r of rows.filter((x) => !x.failed)) {
    const file = join(profileDir, `${r.name}.cpuprofile`);
    console.log(`\n=== ${r.name}: CPU profile of the control plane during the measured ${DURATION} s (${file})\n`);
    console.log(summarizeProfile(file));
  }
}

if (PROFILE) {
  const file = join(profileDir, "bare.cpuprofile");
  await new Promise((r) => (bare.child.exitCode === null ? bare.child.once("exit", r) : r()));
  try {
    console.log(`\n=== bare: CPU profile of the baseline over its whole run, all scenarios (${file})\n`);
    console.log(summarizeProfile(file));
  } catch (err) {
    console.log(`  (no baseline profile: ${err.message})`);
  }
}

const failed = rows.filter((r) => r.failed);
if (failed.length) {
  console.error(`\nfailed scenarios: ${failed.map((r) => r.name).join(", ")}`);
  process.exitCode = 1;
}
const below = rows.filter((r) => !r.failed && r.ratio < TARGET);
if (ASSERT && below.length) {
  console.error(`\nbelow target ${TARGET}: ${below.map((r) => r.name).join(", ")}`);
  process.exitCode = 1;
}
