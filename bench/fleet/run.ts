/**
 * Fleet bench: how the control plane holds N agent connections, on loopback only.
 *
 *   node --import tsx bench/fleet/run.ts        (npm run bench:fleet)
 *
 * Children (all killed by pid at the end, on error, on SIGINT/SIGTERM and at the overall
 * time limit; each also exits by itself when this process goes away):
 *   control-plane.ts  the real control plane, started as `capstan serve` starts it (listen with
 *                     the gateway's door, then createInstance + attach), on SQLite in a temp
 *                     dir or PostgreSQL (FLEET_DB); run once first as the seeding step (FLEET_SEED_N)
 *   bare-server.ts    a bare socket.io server with the same engine settings (baseline)
 *   load-gen.ts × G   the simulated agents, N/G WebSocket connections each
 *
 * Settings (env): FLEET_DB (sqlite | postgresql; PostgreSQL: a fresh database on the server
 * FLEET_PG_URL or CAPSTAN_TEST_PG_URL names, default the test server of
 * test/services/postgres.sh on 127.0.0.1:55432), FLEET_N agents (10000), FLEET_LOADGENS (2), FLEET_CONNECT_CONCURRENCY
 * (200), FLEET_ROUNDTRIP_S measured window of round trips (10 s, at least FLEET_M = 2000 and at
 * most FLEET_M_MAX = 200000 of them), FLEET_JOB_CONCURRENCY (50), FLEET_WARMUP (200),
 * FLEET_SERIAL_M (200 more, one at a time),
 * FLEET_TIMEOUT_S overall limit (900), FLEET_RECONNECT_TIMEOUT_S (240), FLEET_FD_LIMIT
 * (200000), FLEET_PROBE (0: skip the heartbeat/pump/idle probe), FLEET_PROFILE_DIR (CPU
 * profiles of the control plane while connecting, running jobs and reconnecting, and of each
 * of its starts until ready),
 * FLEET_JSON (write all results there), FLEET_KEEP_TMP (1: keep the temp dir).
 */
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { Child, REPO_ROOT, summarize, type GcPauses, type LatencySummary, type MemorySample, type Stall } from "./ipc.js";
import { freePort } from "../../test/support/ports.js";
import { freshPostgresDatabase } from "../../test/api/support/database.js";

const int = (name: string, dflt: number): number => {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return dflt;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < 0) throw new Error(`${name} must be a non-negative integer, got ${raw}`);
  return v;
};
const N = int("FLEET_N", 10_000);
const G = Math.max(1, Math.min(int("FLEET_LOADGENS", 2), N));
const CONNECT_CONCURRENCY = Math.max(1, int("FLEET_CONNECT_CONCURRENCY", 200));
const M = Math.max(1, int("FLEET_M", 2000));
const M_MAX = Math.max(M, int("FLEET_M_MAX", 200_000));
// Four of engine.io's 2.5 s ping rounds: both servers measured over the same share of them.
const ROUNDTRIP_S = int("FLEET_ROUNDTRIP_S", 10);
const roundTripWindow = { m: M, minMs: ROUNDTRIP_S * 1000, max: M_MAX };
const JOB_CONCURRENCY = Math.max(1, int("FLEET_JOB_CONCURRENCY", 50));
const WARMUP = int("FLEET_WARMUP", 200);
const SERIAL = int("FLEET_SERIAL_M", 200);
const TIMEOUT_S = int("FLEET_TIMEOUT_S", 900);
const RECONNECT_TIMEOUT_S = int("FLEET_RECONNECT_TIMEOUT_S", 240);
const FD_LIMIT = int("FLEET_FD_LIMIT", 200_000);
const PROBE = process.env.FLEET_PROBE !== "0";
const PROFILE_DIR = process.env.FLEET_PROFILE_DIR ?? "";
const DB = process.env.FLEET_DB ?? "sqlite";
if (DB !== "sqlite" && DB !== "postgresql") throw new Error(`FLEET_DB must be sqlite or postgresql, got ${DB}`);
const PG_ADMIN_URL = process.env.FLEET_PG_URL || process.env.CAPSTAN_TEST_PG_URL || "postgresql://capstan@127.0.0.1:55432/capstan";
if (N < 1) throw new Error("FLEET_N must be at least 1");

const t0 = Date.now();
let phase = "setup";
const marks: { at: number; phase: string }[] = [{ at: t0, phase }];
const enter = (p: string) => {
  phase = p;
  marks.push({ at: Date.now(), phase: p });
};
const phaseAt = (at: number) => [...marks].reverse().find((m) => m.at <= at)?.phase ?? "?";
const log = (msg: string) => process.stdout.write(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${phase}: ${msg}\n`);

const dir = mkdtempSync(join(tmpdir(), "capstan-fleet-"));
const children = new Set<Child>();
let finished = false;
/** The bench's own PostgreSQL database (FLEET_DB=postgresql), dropped at the end. */
let pgDatabase: { url: string; drop(): Promise<void> } | null = null;

async function cleanup(): Promise<void> {
  await Promise.all([...children].map((c) => c.kill("SIGKILL", 5000).catch(() => {})));
  children.clear();
  if (pgDatabase && process.env.FLEET_KEEP_TMP !== "1") await pgDatabase.drop().catch(() => {});
  if (process.env.FLEET_KEEP_TMP === "1") process.stdout.write(`temp dir kept: ${dir}\n`);
  else rmSync(dir, { recursive: true, force: true });
}

let aborting: Promise<never> | null = null;
/** Prints why, kills every child, removes the temp dir, exits 1; later calls wait for the first. */
function abort(message: string): Promise<never> {
  aborting ??= (async () => {
    finished = true;
    process.stderr.write(`\nFLEET BENCH ABORTED in phase "${phase}" after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${message}\n`);
    await cleanup();
    process.exit(1);
  })();
  return aborting;
}

const overall = setTimeout(() => void abort(`overall time limit of ${TIMEOUT_S} s reached (FLEET_TIMEOUT_S)`), TIMEOUT_S * 1000);
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => void abort(`interrupted (${sig})`));

/**
 * The two servers (control-plane.ts, bare-server.ts) run as plain JS, compiled here from this
 * checkout: the control plane as `capstan serve` runs it (control-plane/dist, built by
 * `tsc -b`), the bare server alike, so neither start pays for tsx's loader (it took 1-4 s of
 * a restart of the control plane, which loads far more modules). The load generators and this
 * runner stay on tsx.
 */
function buildServers(): void {
  const tsc = join(REPO_ROOT, "node_modules", ".bin", "tsc");
  for (const args of [["-b", "control-plane"], ["-p", "bench/fleet/tsconfig.build.json"]]) {
    const r = spawnSync(tsc, args, { cwd: REPO_ROOT, stdio: "inherit" });
    if (r.status !== 0) throw new Error(`tsc ${args.join(" ")} failed (exit ${r.status})`);
  }
}
const COMPILED = new Set(["control-plane.ts", "bare-server.ts"]);

function spawnChild(name: string, script: string, env: Record<string, string>, nodeArgs: string[] = []): Child {
  const compiled = COMPILED.has(script);
  const path = compiled ? join("bench/fleet/.build", script.replace(/\.ts$/, ".js")) : join("bench/fleet", script);
  const c = new Child({ name, script: path, env, nodeArgs, fdLimit: FD_LIMIT, tsx: !compiled });
  children.add(c);
  void c.exited.then(() => children.delete(c));
  return c;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (b: number) => `${(b / 1048576).toFixed(1)} MB`;
const ms = (v: number) => (Number.isFinite(v) ? `${v.toFixed(v < 10 ? 2 : 1)} ms` : "n/a");
const secs = (v: number) => (Number.isFinite(v) ? `${(v / 1000).toFixed(2)} s` : "n/a");

interface LoadgenStatus {
  agents: number;
  connected: number;
  ready: number;
  counters: Record<string, number>;
  connectErrorKinds: Record<string, number>;
  disconnectReasons: Record<string, number>;
}
interface RoundTrips {
  count: number;
  latency: LatencySummary;
  serial: LatencySummary;
  failed: number;
  errors: Record<string, number>;
  wallMs: number;
  perSecond: number;
  eventLoop: { p50: number; p99: number; max: number; mean: number };
  gc?: GcPauses;
  tick?: LatencySummary;
  tickErrors?: Record<string, number>;
  sqlPerJob?: number;
  serialSqlPerJob?: number;
  sqlKindsPerJob?: Record<string, number>;
}
type Mem = MemorySample & { connected?: number; agents?: number };
interface Cpu {
  user: number;
  system: number;
  at: number;
}
/** CPU milliseconds used between two samples, and the share of one core. */
const cpuSpent = (a: Cpu, b: Cpu) => {
  const cpuMs = (b.user + b.system - a.user - a.system) / 1000;
  return { cpuMs, corePercent: (100 * cpuMs) / (b.at - a.at) };
};
const eventLoopMax = (stats: unknown) => (stats as { eventLoop?: { max?: number } } | null)?.eventLoop?.max ?? NaN;
const add = (into: Record<string, number>, from: Record<string, number>) => {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
};

/** Sum of the load generators' statuses. */
async function fleetStatus(loadgens: Child[], since: number) {
  const all = await Promise.all(loadgens.map((l) => l.call<LoadgenStatus>("status", { since }, 20_000)));
  const counters: Record<string, number> = {};
  const kinds: Record<string, number> = {};
  const reasons: Record<string, number> = {};
  for (const s of all) {
    add(counters, s.counters);
    add(kinds, s.connectErrorKinds);
    add(reasons, s.disconnectReasons);
  }
  return { ready: all.reduce((a, s) => a + s.ready, 0), connected: all.reduce((a, s) => a + s.connected, 0), counters, kinds, reasons };
}

async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T>, done: (v: T) => boolean, every = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms (last: ${JSON.stringify(v)})`);
    await sleep(every);
  }
}

/** Connects N agents split over the load generators (concurrency split too); prints progress. */
async function connectFleet(loadgens: Child[], url: string, mode: "capstan" | "bare", tokensFile: string) {
  const latest = new Map<Child, number>();
  const listeners = loadgens.map((l) => {
    const f = (d: { ready: number }) => latest.set(l, d.ready);
    l.events.on("progress", f);
    return () => l.events.off("progress", f);
  });
  const ticker = setInterval(() => log(`${[...latest.values()].reduce((a, b) => a + b, 0)}/${N} ready`), 5000);
  const start = Date.now();
  try {
    const per = Math.ceil(CONNECT_CONCURRENCY / loadgens.length);
    const results = await Promise.all(
      loadgens.map((l, i) =>
        l.call<{ ms: number; ready: number; timedOut: number }>(
          "connect",
          { url, mode, tokensFile, from: Math.floor((i * N) / loadgens.length), to: Math.floor(((i + 1) * N) / loadgens.length), concurrency: per, perAgentTimeoutMs: 30_000 },
          TIMEOUT_S * 1000,
        ),
      ),
    );
    return { ms: Date.now() - start, ready: results.reduce((a, r) => a + r.ready, 0), timedOut: results.reduce((a, r) => a + r.timedOut, 0) };
  } finally {
    clearInterval(ticker);
    for (const off of listeners) off();
  }
}

/**
 * A server child's "listening" event, sent when it is ready (`at`). The control plane listens
 * earlier (`portOpenAt`, its gateway's door holding handshakes) and says where its start's time
 * went: process start to listening, loading the rest, createInstance, attach.
 */
interface Listening {
  at: number;
  portOpenAt?: number;
  portMs?: number;
  loadMs?: number;
  startupMs?: number;
  attachMs?: number;
}
const startup = (l: Listening) =>
  `port open ${ms(l.portMs ?? NaN)} after the process started, then modules ${ms(l.loadMs ?? NaN)}, createInstance ${ms(l.startupMs ?? NaN)}, attach ${ms(l.attachMs ?? NaN)}`;

interface RestartResult {
  killToListenMs: number;
  killToReadyMs: number;
  killToAllMs: number;
  listenToAllMs: number;
  reconnected: number;
  perAgent: LatencySummary;
  agentCounters: Record<string, number>;
  connectErrors: Record<string, number>;
  agentDisconnectReasons: Record<string, number>;
  server: unknown;
  serverCpu: { cpuMs: number; corePercent: number };
  sql: { total: number; byKind: Record<string, number> } | null;
}

/**
 * SIGKILLs the server child, starts it again (same port, same database), and waits until
 * every agent is ready again (reconnected by socket.io's own backoff; capstan: hello acked).
 */
async function restart(current: Child, respawn: () => Child, loadgens: Child[], profileFile: string | null, countSql: boolean): Promise<{ child: Child; r: RestartResult }> {
  await Promise.all(loadgens.map((l) => l.call("resetCounters")));
  const tKill = Date.now();
  await current.kill("SIGKILL");
  const child = respawn();
  const listening = await child.waitEvent<Listening>("listening", 180_000);
  const tListen = listening.portOpenAt || listening.at;
  const tReady = listening.at;
  const cpu0 = await child.call<Cpu>("cpu");
  if (countSql) await child.call("sql", { reset: true });
  if (profileFile) await child.call("profileStart");
  log(`listening again ${secs(tListen - tKill)} after the kill, ready after ${secs(tReady - tKill)}${listening.startupMs === undefined ? "" : ` (${startup(listening)})`}; waiting for ${N} agents (socket.io backoff 500 ms..10 s, ±50%)`);
  let lastPrint = 0;
  let last = await fleetStatus(loadgens, tKill);
  const deadline = Date.now() + RECONNECT_TIMEOUT_S * 1000;
  while (last.ready < N && Date.now() < deadline) {
    await sleep(100);
    last = await fleetStatus(loadgens, tKill);
    if (Date.now() - lastPrint > 5000) {
      lastPrint = Date.now();
      log(`${last.ready}/${N} reconnected, agent disconnects ${JSON.stringify(last.reasons)}, connect errors ${JSON.stringify(last.kinds)}`);
    }
  }
  const tAll = last.ready >= N ? Date.now() : NaN;
  if (profileFile) await child.call("profileStop", { file: profileFile }, 60_000);
  const cpu1 = await child.call<Cpu>("cpu");
  const server = await child.call("gatewayStats", { reset: true });
  const sql = countSql ? await child.call<{ total: number; byKind: Record<string, number> }>("sql", { reset: true }) : null;
  const readyTimes = (await Promise.all(loadgens.map((l) => l.call<number[]>("readyTimes", { since: tKill }, 60_000)))).flat();
  const r: RestartResult = {
    killToListenMs: tListen - tKill,
    killToReadyMs: tReady - tKill,
    killToAllMs: tAll - tKill,
    listenToAllMs: tAll - tListen,
    reconnected: last.ready,
    perAgent: summarize(readyTimes),
    agentCounters: last.counters,
    connectErrors: last.kinds,
    agentDisconnectReasons: last.reasons,
    server,
    serverCpu: cpuSpent(cpu0, cpu1),
    sql,
  };
  if (last.ready >= N) log(`all ${N} back ${secs(r.killToAllMs)} after the kill (${secs(r.listenToAllMs)} after listening)`);
  else log(`only ${last.ready}/${N} back after ${RECONNECT_TIMEOUT_S} s (FLEET_RECONNECT_TIMEOUT_S); going on with those`);
  log(`server side: ${JSON.stringify(server)}; server CPU ${JSON.stringify(r.serverCpu)}${sql ? `; SQL statements ${sql.total} ${JSON.stringify(sql.byKind)}` : ""}`);
  return { child, r };
}

const loadStart = loadavg().map((l) => l.toFixed(1)).join(" ");

async function main(): Promise<void> {
  log(`${DB}, N=${N} agents over ${G} load generator(s), connect concurrency ${CONNECT_CONCURRENCY}, round trips for ${ROUNDTRIP_S} s (${M}–${M_MAX}) at ${JOB_CONCURRENCY} in flight (+${WARMUP} warm-up), ${cpus().length} CPU(s), load average ${loadStart}, temp ${dir}`);
  buildServers();
  const keyFile = join(dir, "fleet_key");
  const { privateKey } = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    privateKeyEncoding: { type: "pkcs1", format: "pem" },
    publicKeyEncoding: { type: "pkcs1", format: "pem" },
  });
  writeFileSync(keyFile, privateKey, { mode: 0o600 });
  const tokensFile = join(dir, "tokens.txt");
  const cpPort = await freePort();
  const barePort = await freePort();
  const cpUrl = `http://127.0.0.1:${cpPort}`;
  if (DB === "postgresql") {
    pgDatabase = await freshPostgresDatabase(PG_ADMIN_URL);
    log(`PostgreSQL database ${new URL(pgDatabase.url).pathname.slice(1)} on ${new URL(PG_ADMIN_URL).host}`);
  }
  const cpEnv: Record<string, string> = {
    FLEET_DATA_DIR: join(dir, "data"),
    FLEET_PORT: String(cpPort),
    FLEET_KEY_FILE: keyFile,
    FLEET_TOKENS_FILE: tokensFile,
    ...(pgDatabase ? { FLEET_DATABASE_URL: pgDatabase.url } : {}),
  };
  const serverNodeArgs = ["--expose-gc", "--max-old-space-size=4096"];
  // With FLEET_PROFILE_DIR each start of the control plane is profiled too, from its first
  // line until ready (cp-start-1 is the first start, cp-start-2 the restart).
  let starts = 0;
  const startCp = () =>
    spawnChild("control-plane", "control-plane.ts", { ...cpEnv, ...(PROFILE_DIR ? { FLEET_STARTUP_PROFILE: join(PROFILE_DIR, `cp-start-${++starts}.cpuprofile`) } : {}) }, [...serverNodeArgs, ...(process.env.FLEET_CP_NODE_ARGS ?? "").split(" ").filter(Boolean)]);

  // ---------------------------------------------------------------- seed, then a clean control plane
  enter("seed");
  const seeder = spawnChild("seed", "control-plane.ts", { ...cpEnv, FLEET_SEED_N: String(N) }, serverNodeArgs);
  const seeded = await seeder.waitEvent<{ seedMs: number }>("seeded", 300_000);
  await seeder.exited;
  log(`${N} servers (createMany, batches of 1000) in ${ms(seeded.seedMs)}`);

  enter("control plane");
  let cp = startCp();
  const first = await cp.waitEvent<Listening>("listening", 180_000);
  log(`listening on ${cpUrl}; ${startup(first)}`);
  const cpMem0 = await cp.call<Mem>("mem");
  log(`heap with 0 agents (after GC): ${mb(cpMem0.heapUsed)}, rss ${mb(cpMem0.rss)}`);

  const loadgens = Array.from({ length: G }, (_, i) => spawnChild(`loadgen-${i}`, "load-gen.ts", {}, ["--expose-gc", "--max-old-space-size=4096"]));
  const lgMem0 = await Promise.all(loadgens.map((l) => l.call<Mem>("mem", undefined, 60_000)));

  // ---------------------------------------------------------------- a. connect N, heap per agent
  enter("a. connect");
  log(`connecting ${N} agents to the control plane`);
  await cp.call("gatewayStats", { reset: true });
  await cp.call("sql", { reset: true });
  const cpCpuA = await cp.call<Cpu>("cpu");
  if (PROFILE_DIR) await cp.call("profileStart");
  const cpConnect = await connectFleet(loadgens, cpUrl, "capstan", tokensFile);
  if (PROFILE_DIR) await cp.call("profileStop", { file: join(PROFILE_DIR, "cp-connect.cpuprofile") }, 60_000);
  const cpConnectCpu = cpuSpent(cpCpuA, await cp.call<Cpu>("cpu"));
  const cpConnectStats = await cp.call("gatewayStats", { reset: true });
  const cpConnectSql = await cp.call<{ total: number; byKind: Record<string, number> }>("sql", { reset: true });
  log(`${cpConnect.ready}/${N} ready (hello acked) in ${secs(cpConnect.ms)}; ${cpConnect.timedOut} waits timed out; control plane CPU ${(cpConnectCpu.cpuMs / N).toFixed(2)} ms per agent`);
  log(`server side: ${JSON.stringify(cpConnectStats)}`);
  log(`SQL statements: ${(cpConnectSql.total / N).toFixed(2)} per agent ${JSON.stringify(cpConnectSql.byKind)}`);
  await waitFor("control plane sees all agents", 60_000, () => cp.call<{ connected: number }>("status"), (s) => s.connected >= N);
  await sleep(1000); // let the hello writes and kicks settle
  const cpMemN = await cp.call<Mem>("mem", undefined, 60_000);
  const lgMemN = await Promise.all(loadgens.map((l) => l.call<Mem>("mem", undefined, 60_000)));
  const heapPerAgent = (cpMemN.heapUsed - cpMem0.heapUsed) / N;
  const rssPerAgent = (cpMemN.rss - cpMem0.rss) / N;
  const lgHeapPerSocket = lgMemN.reduce((a, m, i) => a + m.heapUsed - lgMem0[i]!.heapUsed, 0) / N;
  log(`heap with ${cpMemN.connected} agents: ${mb(cpMemN.heapUsed)} -> ${heapPerAgent.toFixed(0)} B/agent heap, ${rssPerAgent.toFixed(0)} B/agent rss`);

  let probe: { controlPlane: { idle: { cpuPercent: number } } & Record<string, unknown>; loadgensIdle: unknown[] } | null = null;
  if (PROBE) {
    enter("probe");
    log("timing the heartbeat and pump queries at N, then 11 s idle (CPU, event-loop delay, pump passes)");
    const [p, ...lgIdle] = await Promise.all([cp.call<{ idle: { cpuPercent: number } }>("probe", undefined, 120_000), ...loadgens.map((l) => l.call("idle", { ms: 11_000 }, 60_000))]);
    probe = { controlPlane: p, loadgensIdle: lgIdle };
    log(JSON.stringify(probe));
  }

  // ---------------------------------------------------------------- c. job round trips
  enter("c. jobs");
  log(`containers.list jobs via instance.jobs.run for ${ROUNDTRIP_S} s, ${JOB_CONCURRENCY} in flight`);
  if (PROFILE_DIR) await cp.call("profileStart");
  const jobs = await cp.call<RoundTrips>("jobs", { ...roundTripWindow, concurrency: JOB_CONCURRENCY, warmup: WARMUP, serial: SERIAL }, TIMEOUT_S * 1000);
  if (PROFILE_DIR) await cp.call("profileStop", { file: join(PROFILE_DIR, "cp-jobs.cpuprofile") }, 60_000);
  log(`${jobs.count} jobs: p50 ${ms(jobs.latency.p50)} p99 ${ms(jobs.latency.p99)} max ${ms(jobs.latency.max)}, ${jobs.perSecond.toFixed(0)} jobs/s, ${jobs.failed} failed`);
  log(`SQL statements: ${jobs.sqlPerJob?.toFixed(2)} per job ${JSON.stringify(jobs.sqlKindsPerJob)}`);
  const cpErrors1 = await cp.call<Record<string, { count: number; last: string }>>("loggedErrors");
  const stalls: Record<string, Stall[]> = {};
  stalls["control plane (1st process)"] = await cp.call<Stall[]>("stalls");

  // ---------------------------------------------------------------- b. restart
  enter("b. restart");
  log("SIGKILL the control plane, start it again on the same port and database");
  const cpRestart = await restart(cp, startCp, loadgens, PROFILE_DIR ? join(PROFILE_DIR, "cp-restart.cpuprofile") : null, true);
  cp = cpRestart.child;

  enter("c. jobs after restart");
  // A look at the restarted process, not one of the aims: M jobs, no minimum window.
  const jobsAfter = await cp.call<RoundTrips>("jobs", { m: M, minMs: 0, max: M, concurrency: JOB_CONCURRENCY, warmup: WARMUP, serial: SERIAL }, TIMEOUT_S * 1000);
  log(`p50 ${ms(jobsAfter.latency.p50)} p99 ${ms(jobsAfter.latency.p99)}, ${jobsAfter.perSecond.toFixed(0)} jobs/s, ${jobsAfter.failed} failed`);
  const cpErrors2 = await cp.call<Record<string, { count: number; last: string }>>("loggedErrors");
  stalls["control plane (after restart)"] = await cp.call<Stall[]>("stalls");

  enter("control plane down");
  await Promise.all(loadgens.map((l) => l.call("closeAll", undefined, 60_000)));
  await cp.call("shutdown").catch(() => {});
  await cp.kill("SIGTERM", 5000);

  // ---------------------------------------------------------------- d. bare socket.io baseline
  enter("d. bare");
  const bareUrl = `http://127.0.0.1:${barePort}`;
  const startBare = () => spawnChild("bare-server", "bare-server.ts", { FLEET_PORT: String(barePort) }, serverNodeArgs);
  log(`bare socket.io server on ${bareUrl}`);
  let bare = startBare();
  await bare.waitEvent("listening", 120_000);
  const bareMem0 = await bare.call<Mem>("mem");
  await Promise.all(loadgens.map((l) => l.call("resetCounters")));
  const bareCpuA = await bare.call<Cpu>("cpu");
  const bareConnect = await connectFleet(loadgens, bareUrl, "bare", tokensFile);
  const bareConnectCpu = cpuSpent(bareCpuA, await bare.call<Cpu>("cpu"));
  log(`${bareConnect.ready}/${N} connected in ${secs(bareConnect.ms)}; server CPU ${(bareConnectCpu.cpuMs / N).toFixed(2)} ms per socket`);
  await waitFor("bare server sees all sockets", 60_000, () => bare.call<{ connected: number }>("status"), (s) => s.connected >= N);
  const bareMemN = await bare.call<Mem>("mem", undefined, 60_000);
  const bareHeapPerSocket = (bareMemN.heapUsed - bareMem0.heapUsed) / N;
  const bareRssPerSocket = (bareMemN.rss - bareMem0.rss) / N;
  let bareIdle: { cpuPercent: number; eventLoopP99: number; eventLoopMax: number } | null = null;
  if (PROBE) {
    bareIdle = await bare.call("idle", { ms: 11_000 }, 60_000);
    log(`idle with ${N} sockets: ${JSON.stringify(bareIdle)}`);
  }
  log(`echo round trips for ${ROUNDTRIP_S} s, ${JOB_CONCURRENCY} in flight`);
  const echo = await bare.call<RoundTrips>("echo", { ...roundTripWindow, concurrency: JOB_CONCURRENCY, warmup: WARMUP, serial: SERIAL }, TIMEOUT_S * 1000);
  log(`${echo.count} round trips: p50 ${ms(echo.latency.p50)} p99 ${ms(echo.latency.p99)}, ${echo.perSecond.toFixed(0)}/s, ${echo.failed} failed`);

  enter("d. bare restart");
  const bareRestart = await restart(bare, startBare, loadgens, null, false);
  bare = bareRestart.child;

  enter("teardown");
  stalls["bare server"] = await bare.call<Stall[]>("stalls");
  for (const [i, l] of loadgens.entries()) stalls[`load generator ${i}`] = await l.call<Stall[]>("stalls");
  await Promise.all(loadgens.map((l) => l.call("closeAll", undefined, 60_000)));
  await bare.call("shutdown").catch(() => {});

  // ---------------------------------------------------------------- e. table
  const cr = cpRestart.r;
  const br = bareRestart.r;
  const rows: [string, string, string][] = [
    [`connect all ${N} (${CONNECT_CONCURRENCY} in flight)`, `${secs(cpConnect.ms)} (hello acked)`, secs(bareConnect.ms)],
    ["server CPU per connect", ms(cpConnectCpu.cpuMs / N), ms(bareConnectCpu.cpuMs / N)],
    ["heap after GC, 0 agents", mb(cpMem0.heapUsed), mb(bareMem0.heapUsed)],
    [`heap after GC, ${N} agents`, mb(cpMemN.heapUsed), mb(bareMemN.heapUsed)],
    ["heap per agent", `${heapPerAgent.toFixed(0)} B`, `${bareHeapPerSocket.toFixed(0)} B`],
    ["rss per agent", `${rssPerAgent.toFixed(0)} B`, `${bareRssPerSocket.toFixed(0)} B`],
    ...(PROBE && probe && bareIdle
      ? ([[`idle CPU with ${N} agents (% of a core)`, `${probe.controlPlane.idle.cpuPercent.toFixed(1)} %`, `${bareIdle.cpuPercent.toFixed(1)} %`]] as [string, string, string][])
      : []),
    ["restart: kill -> listening", secs(cr.killToListenMs), secs(br.killToListenMs)],
    ["restart: kill -> ready (gateway open)", secs(cr.killToReadyMs), secs(br.killToReadyMs)],
    [`restart: kill -> all ${N} reconnected`, secs(cr.killToAllMs), secs(br.killToAllMs)],
    [`restart: listening -> all ${N} reconnected`, secs(cr.listenToAllMs), secs(br.listenToAllMs)],
    ["restart: per-agent p50 / p99 from kill", `${secs(cr.perAgent.p50)} / ${secs(cr.perAgent.p99)}`, `${secs(br.perAgent.p50)} / ${secs(br.perAgent.p99)}`],
    ["restart: failed connect attempts", String(cr.agentCounters.connectErrors ?? 0), String(br.agentCounters.connectErrors ?? 0)],
    ["restart: agents dropped again (ping timeout)", String(cr.agentDisconnectReasons["ping timeout"] ?? 0), String(br.agentDisconnectReasons["ping timeout"] ?? 0)],
    ["restart: server event-loop delay max", ms(eventLoopMax(cr.server)), ms(eventLoopMax(br.server))],
    [`round trips measured (${ROUNDTRIP_S} s window, ${JOB_CONCURRENCY} in flight)`, String(jobs.count), String(echo.count)],
    ["round trip p50", ms(jobs.latency.p50), ms(echo.latency.p50)],
    ["round trip p90", ms(jobs.latency.p90), ms(echo.latency.p90)],
    ["round trip p99", ms(jobs.latency.p99), ms(echo.latency.p99)],
    ["round trip max", ms(jobs.latency.max), ms(echo.latency.max)],
    ["round trips per second", jobs.perSecond.toFixed(0), echo.perSecond.toFixed(0)],
    ["failed round trips", String(jobs.failed), String(echo.failed)],
    ["event-loop delay p99 during round trips", ms(jobs.eventLoop.p99), ms(echo.eventLoop.p99)],
    [`round trip p50 / p99, 1 in flight (${SERIAL})`, `${ms(jobs.serial.p50)} / ${ms(jobs.serial.p99)}`, `${ms(echo.serial.p50)} / ${ms(echo.serial.p99)}`],
    ["jobs after restart p50 / p99", `${ms(jobsAfter.latency.p50)} / ${ms(jobsAfter.latency.p99)}`, "-"],
  ];
  const w0 = Math.max(...rows.map((r) => r[0].length));
  const w1 = Math.max(...rows.map((r) => r[1].length), "capstan".length);
  const line = (a: string, b: string, c: string) => `  ${a.padEnd(w0)}  ${b.padStart(w1)}  ${c.padStart(16)}`;
  const ratioP50 = jobs.latency.p50 / echo.latency.p50;
  const ratioP99 = jobs.latency.p99 / echo.latency.p99;
  const errs = (label: string, e: Record<string, { count: number; last: string }>) =>
    Object.keys(e).length ? `  control plane logged errors (${label}): ${JSON.stringify(e)}` : "";
  // The aims of issue 16, each a ratio against the bare server measured in this run.
  const aim = (ok: boolean) => (ok ? "ok" : "MISSED");
  const gcLine = (g: GcPauses | undefined) =>
    g ? Object.entries(g).map(([kind, p]) => `${kind} ${p.count} / ${p.totalMs.toFixed(1)} / ${p.maxMs.toFixed(1)}`).join(", ") || "none" : "-";
  const connectRatio = cpConnect.ms / bareConnect.ms;
  const restartRatio = cr.killToAllMs / br.killToAllMs;
  const dropped = (cr.agentDisconnectReasons["ping timeout"] ?? 0) + (N - cr.reconnected);
  const sqlPerJob = jobs.sqlPerJob ?? NaN;
  const aims: [string, string, boolean][] = [
    [`job round trip p99 (${JOB_CONCURRENCY} in flight)`, `${ms(jobs.latency.p99)} / ${ms(echo.latency.p99)} = ${ratioP99.toFixed(2)}x (aim <= 3x)`, ratioP99 <= 3],
    ["SQL statements per job", `${sqlPerJob.toFixed(2)} at ${JOB_CONCURRENCY} in flight, ${(jobs.serialSqlPerJob ?? NaN).toFixed(2)} at 1 (aim <= 4)`, sqlPerJob <= 4 && (jobs.serialSqlPerJob ?? NaN) <= 4],
    [`connect all ${N}`, `${secs(cpConnect.ms)} / ${secs(bareConnect.ms)} = ${connectRatio.toFixed(2)}x (aim <= 2x)`, connectRatio <= 2],
    [`restart: kill -> all ${N} re-registered`, `${secs(cr.killToAllMs)} / ${secs(br.killToAllMs)} = ${Number.isFinite(restartRatio) ? restartRatio.toFixed(2) + "x" : "n/a"} (aim <= 2x)`, restartRatio <= 2],
    ["restart: agents dropped or not back", `${dropped} (aim 0)`, dropped === 0],
    ["heap per agent", `${(heapPerAgent / 1024).toFixed(1)} KB (aim <= 15 KB)`, heapPerAgent <= 15 * 1024],
  ];
  const aimW = Math.max(...aims.map((a) => a[0].length));
  const out = [
    "",
    `fleet bench: ${DB}, N=${N} agents, ${G} load generator(s), ${cpus().length} CPU(s), node ${process.version}; load average ${loadStart} at start, ${loadavg().map((l) => l.toFixed(1)).join(" ")} at end`,
    line("", "capstan", "bare socket.io"),
    ...rows.map((r) => line(...r)),
    "",
    `  ratio ours/bare: p50 ${ratioP50.toFixed(2)}x, p99 ${ratioP99.toFixed(2)}x`,
    // The profiler samples the control plane (every 0.5 ms, from its first line at each start)
    // and not the bare server: a profiled run's ratios carry that overhead on one side only.
    PROFILE_DIR ? "  aims (issue 16), capstan / bare in this run (PROFILED: the control plane's figures include the profiler's overhead, the bare server's do not; judge the aims on a run without FLEET_PROFILE_DIR):" : "  aims (issue 16), capstan / bare in this run:",
    ...aims.map(([what, figure, ok]) => `    ${what.padEnd(aimW)}  ${figure}  ${aim(ok)}`),
    `  load generators: ${lgHeapPerSocket.toFixed(0)} B heap per client socket`,
    `  restart, agent side: disconnects ${JSON.stringify(cr.agentDisconnectReasons)}, connect errors ${JSON.stringify(cr.connectErrors)}`,
    `  restart, control plane: ${JSON.stringify(cr.server)}, CPU ${cr.serverCpu.cpuMs.toFixed(0)} ms (${cr.serverCpu.corePercent.toFixed(0)} % of a core)`,
    `  restart, bare: disconnects ${JSON.stringify(br.agentDisconnectReasons)}, connect errors ${JSON.stringify(br.connectErrors)}, CPU ${br.serverCpu.cpuMs.toFixed(0)} ms`,
    `  SQL statements per connect: ${(cpConnectSql.total / N).toFixed(2)}; per job: ${jobs.sqlPerJob?.toFixed(2)} at ${JOB_CONCURRENCY} in flight ${JSON.stringify(jobs.sqlKindsPerJob)}, ${jobs.serialSqlPerJob?.toFixed(2)} at 1 in flight`,
    cr.sql ? `  SQL statements during the restart: ${cr.sql.total} (${(cr.sql.total / N).toFixed(2)} per agent) ${JSON.stringify(cr.sql.byKind)}` : "",
    `  GC pauses during the round trips (count, total ms, longest ms by kind): capstan ${gcLine(jobs.gc)}, bare ${gcLine(echo.gc)}`,
    `  queue pump passes during the jobs: ${JSON.stringify(jobs.tick)}, failed passes ${JSON.stringify(jobs.tickErrors ?? {})}`,
    jobs.failed ? `  job failures: ${JSON.stringify(jobs.errors)}` : "",
    "  event-loop stalls > 2 s (process: length at time-since-start [phase]):",
    ...Object.entries(stalls).map(
      ([name, list]) =>
        `    ${name}: ${list.length ? list.slice(0, 12).map((x) => `${secs(x.lateMs)} at ${((x.at - t0) / 1000).toFixed(0)} s [${phaseAt(x.at)}]`).join(", ") + (list.length > 12 ? `, ... (${list.length})` : "") : "none"}`,
    ),
    errs("1st process", cpErrors1),
    errs("after restart", cpErrors2),
    `  total ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    "",
  ].filter((l) => l !== "");
  process.stdout.write(out.join("\n") + "\n");

  if (process.env.FLEET_JSON) {
    writeFileSync(
      process.env.FLEET_JSON,
      JSON.stringify(
        {
          db: DB,
          n: N,
          loadgens: G,
          cpus: cpus().length,
          loadavg: { start: loadStart, end: loadavg() },
          seedMs: seeded.seedMs,
          connect: { capstan: { ...cpConnect, cpu: cpConnectCpu, server: cpConnectStats, sql: cpConnectSql }, bare: { ...bareConnect, cpu: bareConnectCpu } },
          memory: { cp0: cpMem0, cpN: cpMemN, bare0: bareMem0, bareN: bareMemN, heapPerAgent, rssPerAgent, bareHeapPerSocket, bareRssPerSocket, lgHeapPerSocket },
          probe,
          bareIdle,
          jobs,
          restart: { capstan: cr, bare: br },
          jobsAfterRestart: jobsAfter,
          echo,
          ratio: { p50: ratioP50, p99: ratioP99, connect: connectRatio, restart: restartRatio },
          aims: aims.map(([what, figure, ok]) => ({ what, figure, ok })),
          cpErrors: { first: cpErrors1, afterRestart: cpErrors2 },
          stalls,
          phases: marks.map((m) => ({ phase: m.phase, atS: (m.at - t0) / 1000 })),
        },
        null,
        2,
      ),
    );
  }
}

main()
  .then(async () => {
    if (finished) return; // aborted meanwhile: abort() cleans up and exits
    clearTimeout(overall);
    finished = true;
    await cleanup();
    process.exit(0);
  })
  .catch((err: unknown) => abort(err instanceof Error ? (err.stack ?? err.message) : String(err)));
