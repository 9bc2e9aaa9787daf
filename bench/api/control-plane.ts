// Child process of bench/api/run.mjs: a real control plane (createInstance, as the API test
// harness builds it) on SQLite in a temp dir, seeded with projects through its own API.
// Talks to the parent over IPC: sends {type: "ready", url, token, bodies, statements, failures},
// then answers "breakdown", "profile-start"/"profile-stop", "cpu-reset"/"cpu-read" and "stop".
import { createServer } from "node:http";
import { Session } from "node:inspector/promises";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import Sqlite from "better-sqlite3";
import { loadConfig } from "../../control-plane/src/config.js";
import { createInstance } from "../../control-plane/src/instance.js";
import type { ResponseCache } from "../../control-plane/src/http/response-cache.js";
import { breakdown } from "./breakdown.js";
import { applyAfterStart, applyBeforeStart, parseExperiments } from "./experiments.js";

const projects = Number(process.env.BENCH_PROJECTS ?? 1000);
const paths: string[] = JSON.parse(process.env.BENCH_PATHS ?? '["/api/v1/projects"]');

const experiments = parseExperiments(process.env.BENCH_EXPERIMENTS);
applyBeforeStart(experiments);

const dir = mkdtempSync(join(tmpdir(), "capstan-bench-"));
const config = loadConfig({
  PLATFORM_DATA_DIR: dir,
  PLATFORM_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "silent",
  PLATFORM_RATE_LIMIT_PER_MINUTE: "1000000",
  PLATFORM_HOST: "127.0.0.1",
});
const instance = await createInstance(config, pino({ level: config.logLevel }));
const token = (await instance.admin.bootstrapRoot(config.rootEmail))!;
// The response cache of GET /projects (http/response-cache.ts); BENCH_CACHE=off measures the
// uncached path (every request reads the database and encodes the JSON).
const cache = instance.app.locals.responseCache as ResponseCache | undefined;
await cache?.ready;
if (cache && process.env.BENCH_CACHE === "off") cache.enabled = false;
await applyAfterStart(experiments, instance.database.prisma);
const server = createServer(instance.app);
server.keepAliveTimeout = 65_000;
await instance.attach(server);
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const addr = server.address();
const url = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
const headers = { Authorization: `Bearer ${token}`, Accept: "application/json" };

// Seed through the API, 8 at a time.
let next = 0;
let firstUuid = "";
const worker = async () => {
  while (next < projects) {
    const n = ++next;
    const res = await fetch(`${url}/api/v1/projects`, {
      method: "POST",
      headers: { ...headers, "Content-Type": "application/json" },
      body: JSON.stringify({ name: `project ${n}`, description: `Benchmark project number ${n}` }),
    });
    if (res.status !== 201) throw new Error(`seeding project ${n}: ${res.status} ${await res.text()}`);
    const body = (await res.json()) as { uuid: string };
    if (n === 1) firstUuid = body.uuid;
  }
};
await Promise.all(Array.from({ length: 8 }, worker));

// Capture the exact bodies the bare server will serve, and the SQL statements one request
// runs (better-sqlite3 is synchronous and used by both Prisma and the control plane's plain
// read path, so wrapping the execution methods of its Statement for these few requests sees
// them all, prepared statements reused from a cache included; unwrapped before the load).
const bodies: Record<string, unknown> = {};
const statements: Record<string, { sql: string; count: number }[]> = {};
const failures: Record<string, string> = {};
const resolved: string[] = [];
const probeDb = new Sqlite(":memory:");
const stmtProto = Object.getPrototypeOf(probeDb.prepare("SELECT 1")) as Record<string, (...a: unknown[]) => unknown>;
probeDb.close();
const methods = ["all", "get", "run", "iterate"] as const;
const originals = Object.fromEntries(methods.map((m) => [m, stmtProto[m]!]));
for (const p of paths) {
  const path = p.replace("{first}", firstUuid);
  await fetch(url + path, { headers }); // settle once-per-token work (last_used_at)
  const seen = new Map<string, number>();
  for (const m of methods) {
    stmtProto[m] = function (this: { source: string }, ...a: unknown[]) {
      seen.set(this.source, (seen.get(this.source) ?? 0) + 1);
      return originals[m]!.apply(this, a);
    };
  }
  const res = await fetch(url + path, { headers });
  const body = await res.json();
  for (const m of methods) stmtProto[m] = originals[m]!;
  resolved.push(path);
  statements[path] = [...seen].map(([sql, count]) => ({ sql, count }));
  if (res.status === 200) bodies[path] = body;
  else failures[path] = `${res.status} ${JSON.stringify(body)}`;
}

const cpuStart = process.cpuUsage();
let wallStart = performance.now();
const cacheStats = () => cache?.stats() ?? { state: "off", hits: 0, misses: 0 };
let cacheStart = cacheStats();
const profiler = new Session();
process.on("message", async (msg: { type: string; file?: string; path?: string }) => {
  if (msg.type === "breakdown") {
    process.send!({ type: "breakdown", phases: await breakdown(instance, config, token, msg.path!) });
  } else if (msg.type === "profile-start") {
    profiler.connect();
    await profiler.post("Profiler.enable");
    await profiler.post("Profiler.setSamplingInterval", { interval: 200 });
    await profiler.post("Profiler.start");
    process.send!({ type: "profiling" });
  } else if (msg.type === "profile-stop") {
    const { profile } = await profiler.post("Profiler.stop");
    profiler.disconnect();
    writeFileSync(msg.file!, JSON.stringify(profile));
    process.send!({ type: "profiled", file: msg.file });
  } else if (msg.type === "cpu-reset") {
    Object.assign(cpuStart, process.cpuUsage());
    wallStart = performance.now();
    cacheStart = cacheStats();
  } else if (msg.type === "cpu-read") {
    const used = process.cpuUsage(cpuStart);
    const now = cacheStats();
    const cacheUse = { state: cache?.enabled === false ? "disabled" : now.state, hits: now.hits - cacheStart.hits, misses: now.misses - cacheStart.misses };
    process.send!({ type: "cpu", share: (used.user + used.system) / 1000 / (performance.now() - wallStart), cache: cacheUse });
  } else if (msg.type === "stop") {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await instance.close();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  }
});
process.send!({ type: "ready", url, token, paths: resolved, bodies, statements, failures });
