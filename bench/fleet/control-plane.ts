/**
 * The control plane under test, in its own process: loadConfig + createInstance +
 * http.createServer + instance.attach, listening on 127.0.0.1, SQLite in the bench's temp
 * dir (or the PostgreSQL database FLEET_DATABASE_URL names), logs silent, rate limit raised.
 * Spawned by run.ts (with --expose-gc), which drives it over IPC: memory after GC, connected agents, job round trips, probes.
 *
 * Env: FLEET_DATA_DIR, FLEET_PORT; FLEET_SEED_N > 0 makes it a seeding step instead: it
 * creates that many servers (one private key of the root team, from FLEET_KEY_FILE), writes
 * their agent tokens to FLEET_TOKENS_FILE (one a line, in server id order) and exits, so the
 * measured process starts clean.
 */
import { createServer, type RequestListener } from "node:http";
import { readFileSync, writeFileSync } from "node:fs";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { Session } from "node:inspector/promises";
import { openGatewayDoor } from "@capstan/control-plane/dist/agents/door.js";
import { gcPauses, watchStalls, idleCost, memoryAfterGc, notifyParent, pool, poolFor, serveParent, summarize } from "./ipc.js";

const started = performance.now();
// FLEET_STARTUP_PROFILE (set by run.ts with FLEET_PROFILE_DIR): a CPU profile of this start,
// from here until ready (written just before the "listening" event).
const startupProfile = process.env.FLEET_STARTUP_PROFILE && !Number(process.env.FLEET_SEED_N ?? "0") ? new Session() : null;
if (startupProfile) {
  startupProfile.connect();
  await startupProfile.post("Profiler.enable");
  await startupProfile.post("Profiler.setSamplingInterval", { interval: 500 });
  await startupProfile.post("Profiler.start");
}
const env = (k: string): string => {
  const v = process.env[k];
  if (v === undefined) throw new Error(`${k} is not set`);
  return v;
};
const dataDir = env("FLEET_DATA_DIR");
const port = Number(env("FLEET_PORT"));
const seedN = Number(process.env.FLEET_SEED_N ?? "0");

// As `capstan serve` does (control-plane/src/server.ts): listen first, agents' handshakes held
// at the gateway's door, then load and open the rest of the control plane.
let app: RequestListener | null = null;
const http = createServer((req, res) => {
  if (app) return app(req, res);
  res.writeHead(503).end();
});
const door = seedN > 0 ? null : openGatewayDoor(http);
let portOpenAt = 0;
if (door) {
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen({ port, host: "127.0.0.1", backlog: 4096 }, () => resolve()); // as server.ts does
  });
  portOpenAt = Date.now();
}
const loadStarted = performance.now();
const [{ chunks }, { pino }, { default: Sqlite }, { default: pg }, { AGENTS_NAMESPACE }, { loadConfig }, { createInstance }, { generateAgentToken, hashAgentToken }, { parsePrivateKey }, { newUuid }] =
  await Promise.all([
    import("@capstan/control-plane/dist/db/chunks.js"),
    import("pino"),
    import("better-sqlite3"),
    import("pg"),
    import("@capstan/shared"),
    import("@capstan/control-plane/dist/config.js"),
    import("@capstan/control-plane/dist/instance.js"),
    import("@capstan/control-plane/dist/crypto/agent-token.js"),
    import("@capstan/control-plane/dist/crypto/ssh-key.js"),
    import("@capstan/control-plane/dist/lib/ids.js"),
  ]);
const loadMs = performance.now() - loadStarted;

// Instrumentation only: every SQL statement the control plane runs is counted, by kind: on
// SQLite each is a better-sqlite3 statement's run/all/get/iterate, on PostgreSQL through pg's
// Client.query() (the Prisma adapter, the plain read path, the rate limiter and the socket.io
// adapter alike). That gives the database work per agent and per job.
let sqlCount = 0;
let sqlByKind: Record<string, number> = {};
// The kind of each SQL text is worked out once (the regexes cost more than some statements).
const kinds = new Map<string, string>();
function countSql(sql: string): void {
  sqlCount++;
  let kind = kinds.get(sql);
  if (kind === undefined) {
    kind = kindOf(sql);
    if (kinds.size < 10_000) kinds.set(sql, kind);
  }
  sqlByKind[kind] = (sqlByKind[kind] ?? 0) + 1;
}
function kindOf(sql: string): string {
  return sql
    .replace(/`main`\./g, "")
    .replace(/\$\d+(::\w+)?/g, "?")
    .replace(/\s+/g, " ")
    .trim()
    .replace(/^(SELECT) .*? (FROM \S+)(?: WHERE (.*?))?(?: ORDER BY.*| LIMIT.*)?$/, (_m, a, b, w) => `${a} ${b}${w ? " WHERE " + w.replace(/[`"]/g, "").replace(/\?(, ?\?)*/g, "?").slice(0, 90) : ""}`)
    .replace(/^(UPDATE \S+) SET .*? WHERE (.*)$/, (_m, a, w) => `${a} WHERE ${w.replace(/[`"]/g, "").replace(/\?(, ?\?)*/g, "?").slice(0, 90)}`)
    .replace(/^(INSERT INTO \S+).*/, "$1")
    .slice(0, 140);
}
// Executions, not preparations: the plain read and write paths prepare a statement once and run
// it many times.
const probe = new Sqlite(":memory:");
const statementProto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<"run" | "all" | "get" | "iterate", (...args: unknown[]) => unknown>;
probe.close();
for (const method of ["run", "all", "get", "iterate"] as const) {
  const original = statementProto[method];
  statementProto[method] = function (this: { source: string }, ...args: unknown[]) {
    countSql(this.source);
    return original.apply(this, args);
  };
}
const pgQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
(pg.Client.prototype as { query: unknown }).query = function (this: unknown, ...args: unknown[]) {
  const first = args[0] as string | { text?: string } | undefined;
  const text = typeof first === "string" ? first : first?.text;
  if (typeof text === "string") countSql(text);
  return pgQuery.apply(this, args);
};
const config = loadConfig({
  PLATFORM_DATA_DIR: dataDir,
  PLATFORM_PORT: String(port),
  PLATFORM_HOST: "127.0.0.1",
  PLATFORM_LOG_LEVEL: "silent",
  PLATFORM_RATE_LIMIT_PER_MINUTE: "1000000",
  ...(process.env.FLEET_DATABASE_URL ? { DATABASE_URL: process.env.FLEET_DATABASE_URL } : {}),
});
// Logs stay silent, but errors the control plane logs are counted (never printed) so the
// bench can report them: e.g. a heartbeat or pump pass that fails at this fleet size.
const loggedErrors: Record<string, { count: number; last: string }> = {};
const errorCounter = {
  write(line: string) {
    try {
      const o = JSON.parse(line) as { msg?: string; err?: { message?: string } };
      const k = o.msg ?? "?";
      const e = (loggedErrors[k] ??= { count: 0, last: "" });
      e.count++;
      e.last = String(o.err?.message ?? "").split("\n").filter(Boolean).pop()?.slice(0, 200) ?? "";
    } catch {
      /* not JSON: ignore */
    }
  },
};
const createStarted = performance.now();
const instance = await createInstance(config, pino({ level: "error" }, errorCounter));
const db = instance.database.prisma;
const startupMs = performance.now() - createStarted;

// Instrumentation only (nothing of the control plane is changed): how long each pass of the
// queue's pump takes. jobs.start() (called by attach) looks tick up on the instance.
const tickMs: number[] = [];
const tickErrors: Record<string, number> = {};
const originalTick = instance.jobs.tick.bind(instance.jobs);
instance.jobs.tick = async () => {
  const t = performance.now();
  try {
    await originalTick();
  } catch (err) {
    const k = String((err as Error)?.message ?? err).split("\n").filter(Boolean).pop()!.slice(0, 120);
    tickErrors[k] = (tickErrors[k] ?? 0) + 1;
    throw err;
  } finally {
    tickMs.push(performance.now() - t);
    if (tickMs.length > 10_000) tickMs.splice(0, 5_000);
  }
};

if (seedN > 0) {
  const t = performance.now();
  await instance.admin.bootstrapRoot(config.rootEmail);
  const team = await db.team.findFirstOrThrow({ orderBy: { id: "asc" } });
  const keyText = readFileSync(env("FLEET_KEY_FILE"), "utf8");
  const parsed = parsePrivateKey(keyText);
  if ("error" in parsed) throw new Error(parsed.error);
  const key = await db.privateKey.create({
    data: {
      uuid: newUuid(),
      teamId: team.id,
      name: "fleet-bench",
      privateKeyEncrypted: instance.box.seal(keyText.trim() + "\n"),
      publicKey: parsed.publicKey,
      fingerprint: parsed.fingerprint,
    },
  });
  const tokens: string[] = [];
  const BATCH = 1000;
  for (let from = 0; from < seedN; from += BATCH) {
    const rows = [];
    for (let i = from; i < Math.min(seedN, from + BATCH); i++) {
      const token = generateAgentToken();
      tokens.push(token);
      rows.push({
        uuid: newUuid(),
        teamId: team.id,
        name: `fleet-${i}`,
        ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
        privateKeyId: key.id,
        agentTokenHash: hashAgentToken(token),
      });
    }
    await db.server.createMany({ data: rows });
  }
  writeFileSync(env("FLEET_TOKENS_FILE"), tokens.join("\n") + "\n", { mode: 0o600 });
  const seedMs = performance.now() - t;
  await instance.close();
  await notifyParent("seeded", { seedMs, startupMs });
  process.exit(0);
}

const attachStarted = performance.now();
const gateway = await instance.attach(http, door!);
app = instance.app;
const attachMs = performance.now() - attachStarted;

// Instrumentation of the agents namespace (listeners added next to the gateway's own): how
// long a handshake waits in the gateway's auth middleware, and why agents disconnect.
let authWaitMs: number[] = [];
let connections = 0;
const disconnectReasons: Record<string, number> = {};
gateway.io.of(AGENTS_NAMESPACE).on("connection", (socket) => {
  connections++;
  if (authWaitMs.length < 200_000) authWaitMs.push(Date.now() - socket.handshake.issued);
  socket.on("disconnect", (reason) => {
    disconnectReasons[reason] = (disconnectReasons[reason] ?? 0) + 1;
  });
});

const eld = monitorEventLoopDelay({ resolution: 10 });
// GC pauses during the measured round trips (a p99 that is one major GC shows here).
const gc = gcPauses();
eld.enable();
const eldSummary = () => ({
  p50: eld.percentile(50) / 1e6,
  p99: eld.percentile(99) / 1e6,
  max: eld.max / 1e6,
  mean: eld.mean / 1e6,
});

let profiler: Session | null = null;

const stalls = watchStalls();

serveParent({
  stalls: () => stalls(),
  /** CPU profile of this process (FLEET_PROFILE_DIR): start, then stop writing a .cpuprofile. */
  profileStart: async () => {
    profiler = new Session();
    profiler.connect();
    await profiler.post("Profiler.enable");
    await profiler.post("Profiler.setSamplingInterval", { interval: 500 });
    await profiler.post("Profiler.start");
    return true;
  },
  profileStop: async (args: { file: string }) => {
    if (!profiler) return false;
    const { profile } = await profiler.post("Profiler.stop");
    profiler.disconnect();
    profiler = null;
    writeFileSync(args.file, JSON.stringify(profile));
    return true;
  },
  mem: () => memoryAfterGc().then((m) => ({ ...m, connected: gateway.connectedServerIds().length })),
  status: () => ({ connected: gateway.connectedServerIds().length }),
  loggedErrors: () => loggedErrors,
  cpu: () => ({ ...process.cpuUsage(), at: performance.now() }),
  /** SQL statements run since the last reset, by kind. */
  sql: (args: { reset?: boolean } | undefined) => {
    const r = { total: sqlCount, byKind: Object.fromEntries(Object.entries(sqlByKind).sort((a, b) => b[1] - a[1]).slice(0, 20)) };
    if (args?.reset) {
      sqlCount = 0;
      sqlByKind = {};
    }
    return r;
  },
  /** Since the last reset: connections, time spent in the auth middleware, disconnect reasons, event-loop delay. */
  gatewayStats: (args: { reset?: boolean } | undefined) => {
    const r = { connections, authWait: summarize(authWaitMs), disconnectReasons: { ...disconnectReasons }, eventLoop: eldSummary() };
    if (args?.reset) {
      connections = 0;
      authWaitMs = [];
      for (const k of Object.keys(disconnectReasons)) delete disconnectReasons[k];
      eld.reset();
    }
    return r;
  },
  eventLoop: (args: { reset?: boolean } | undefined) => {
    const s = eldSummary();
    if (args?.reset) eld.reset();
    return s;
  },
  /** Jobs to random connected servers for the window (at least m, at least minMs, at most max), `concurrency` in flight, timed call -> outcome. */
  jobs: async (args: { m: number; minMs: number; max: number; concurrency: number; warmup: number; serial: number }) => {
    const ids = gateway.connectedServerIds();
    if (!ids.length) throw new Error("no agent connected");
    const latencies: number[] = [];
    const errors: Record<string, number> = {};
    let failed = 0;
    const one = async (record: boolean) => {
      const serverId = ids[Math.floor(Math.random() * ids.length)]!;
      const t = performance.now();
      const r = await instance.jobs.run(serverId, "containers.list", {});
      const dt = performance.now() - t;
      if (r.status !== "succeeded") {
        failed++;
        errors[r.error] = (errors[r.error] ?? 0) + 1;
      } else if (record) latencies.push(dt);
    };
    await pool(args.warmup, args.concurrency, () => one(false));
    tickMs.length = 0;
    eld.reset();
    const sql0 = sqlCount;
    const kinds0 = { ...sqlByKind };
    gc.start();
    const t = performance.now();
    const count = await poolFor({ min: args.m, minMs: args.minMs, max: args.max }, args.concurrency, () => one(true));
    const wallMs = performance.now() - t;
    const gcDuring = gc.stop();
    const sqlPerJob = (sqlCount - sql0) / count;
    const sqlKindsPerJob = Object.fromEntries(
      Object.entries(sqlByKind)
        .map(([k, v]) => [k, (v - (kinds0[k] ?? 0)) / count] as const)
        .filter(([, v]) => v >= 0.01)
        .sort((a, b) => b[1] - a[1]),
    );
    const loaded = latencies.splice(0);
    const loop = eldSummary();
    const ticks = summarize(tickMs);
    // the same, one at a time: the service time without queueing behind the others (and the
    // statements a job costs when it has none to share them with)
    const serialSql0 = sqlCount;
    for (let i = 0; i < args.serial; i++) await one(true);
    const serial = summarize(latencies);
    return {
      sqlPerJob,
      serialSqlPerJob: args.serial ? (sqlCount - serialSql0) / args.serial : NaN,
      sqlKindsPerJob,
      serial,
      latency: summarize(loaded),
      failed,
      errors,
      wallMs,
      count,
      perSecond: (count / wallMs) * 1000,
      eventLoop: loop,
      gc: gcDuring,
      tick: ticks,
      tickErrors: { ...tickErrors },
    };
  },
  /**
   * What the gateway's heartbeat (every 10 s) and the queue's pump (every 1 s) cost with
   * this many agents: the same Prisma calls, timed here, plus the measured pump passes.
   */
  probe: async () => {
    const ids = gateway.connectedServerIds();
    const time = async (f: () => Promise<unknown>): Promise<number | string> => {
      const t = performance.now();
      try {
        await f();
      } catch (err) {
        return `failed after ${(performance.now() - t).toFixed(1)} ms: ${String((err as Error)?.message ?? err).split("\n").filter(Boolean).pop()}`;
      }
      return performance.now() - t;
    };
    // The statements of one gateway heartbeat (agents/replica-lease.ts: renew this replica's
    // lease, look for lapsed ones, count the rows it holds) and of the queue pump (ids in chunks).
    const replica = (await db.server.findFirst({ where: { status: "reachable", gatewayReplica: { not: null } }, select: { gatewayReplica: true } }))?.gatewayReplica ?? "none";
    const heartbeatUpdateMs = await time(async () => {
      await db.gatewayReplica.updateMany({ where: { id: replica }, data: { beatAt: new Date() } });
      await db.server.count({ where: { status: "reachable", gatewayReplica: replica } });
    });
    const heartbeatStaleMs = await time(async () => {
      await db.gatewayReplica.findMany({ where: { beatAt: { lt: new Date(Date.now() - 35_000) }, id: { not: replica } }, select: { id: true, beatAt: true } });
      await db.server.findMany({ where: { status: "reachable", gatewayReplica: null, lastSeenAt: { lt: new Date(Date.now() - 35_000) } }, select: { id: true } });
    });
    const pumpPendingMs = await time(async () => {
      for (const part of chunks(ids)) {
        await db.job.findMany({ where: { serverId: { in: part }, status: { in: ["queued", "dispatched"] } }, orderBy: { createdAt: "asc" }, take: 500 });
      }
    });
    let includesMs = 0;
    {
      const t = performance.now();
      for (let i = 0; i < 100; i++) [...ids].includes(ids[ids.length - 1]!);
      includesMs = (performance.now() - t) / 100;
    }
    // What one Prisma round trip costs here (SQLite in-process, or PostgreSQL on loopback): the unit of the queue's work.
    const some = await db.server.findFirstOrThrow({ select: { id: true } });
    const Q = 500;
    let t = performance.now();
    for (let i = 0; i < Q; i++) await db.server.findUnique({ where: { id: some.id } });
    const prismaFindUniqueUs = ((performance.now() - t) * 1000) / Q;
    t = performance.now();
    for (let i = 0; i < Q; i++) await db.server.updateMany({ where: { id: some.id, status: "reachable" }, data: { lastSeenAt: new Date() } });
    const prismaUpdateManyUs = ((performance.now() - t) * 1000) / Q;
    tickMs.length = 0;
    const idle = await idleCost(11_000); // one heartbeat and ~10 pump passes, idle
    return {
      prismaFindUniqueUs,
      prismaUpdateManyUs,
      idle,
      agents: ids.length,
      heartbeatUpdateMs,
      heartbeatStaleMs,
      pumpPendingMs,
      kickConnectedIncludesMs: includesMs,
      idleTick: summarize(tickMs),
      tickErrors: { ...tickErrors },
    };
  },
  shutdown: async () => {
    setTimeout(() => process.exit(0), 50);
    return true;
  },
});

// Where a start's time goes: from the process's start to listening (the door), loading the
// rest, createInstance, attach; `at` is when everything is ready.
const readyAt = Date.now();
if (startupProfile) {
  const { profile } = await startupProfile.post("Profiler.stop");
  startupProfile.disconnect();
  writeFileSync(process.env.FLEET_STARTUP_PROFILE!, JSON.stringify(profile));
}
void notifyParent("listening", { startupMs, attachMs, loadMs, portMs: started, portOpenAt, pid: process.pid, at: readyAt });
