import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes, randomUUID } from "node:crypto";
import { pino } from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { JOB_TYPES, type JobAck, type JobEnvelope, type JobType } from "@capstan/shared";
import type { DatabaseConfig } from "../config.js";
import { migrate } from "../db/migrate.js";
import { openDatabase, type Database, type Db } from "../db/client.js";
import { openReader, type SqlReader } from "../db/reader.js";
import { SecretBox } from "../crypto/secret-box.js";
import { freshPostgresDatabase } from "../../../test/api/support/database.js";
import type { JobDispatcher } from "./dispatcher.js";
import { JobQueue } from "./queue.js";
import type { OutcomeHandler, OutcomeMap } from "./outcomes.js";

/**
 * The queue against a real database: SQLite in a temp dir, or a fresh PostgreSQL database
 * when CAPSTAN_TEST_PG_URL names a server (the same switch as the API tests). Agents are a
 * scripted JobDispatcher; statements are counted as calls into the database client.
 */
let dir: string;
let database: Database;
let reader: SqlReader;
let dropPg: (() => Promise<void>) | null = null;
let db: Db;
let serverId: number;
let otherServerId: number;
const calls: string[] = [];
const box = new SecretBox(randomBytes(32));

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "capstan-queue-"));
  let config: DatabaseConfig = { kind: "sqlite", file: join(dir, "db.sqlite") };
  if (process.env.CAPSTAN_TEST_PG_URL) {
    const pg = await freshPostgresDatabase(process.env.CAPSTAN_TEST_PG_URL);
    dropPg = pg.drop;
    config = { kind: "postgresql", url: pg.url };
  }
  await migrate(config);
  database = await openDatabase(config);
  reader = openReader(config);
  const team = await database.prisma.team.create({ data: { name: "t" } });
  const key = await database.prisma.privateKey.create({ data: { uuid: randomUUID(), teamId: team.id, name: "k", privateKeyEncrypted: "x", publicKey: "x", fingerprint: "x" } });
  const server = (name: string) => database.prisma.server.create({ data: { uuid: randomUUID(), teamId: team.id, name, ip: "10.0.0.1", privateKeyId: key.id, agentTokenHash: randomUUID() } });
  serverId = (await server("a")).id;
  otherServerId = (await server("b")).id;
  // Every call into the client (model operations and raw SQL) is one statement on the hot path.
  db = new Proxy(database.prisma, {
    get(target, prop, recv) {
      const value = Reflect.get(target, prop, recv);
      if (typeof prop !== "string") return value;
      if (typeof value === "function" && prop.startsWith("$") && prop !== "$transaction") {
        return (...args: unknown[]) => (calls.push(prop), (value as (...a: unknown[]) => unknown).apply(target, args));
      }
      if (typeof value !== "object" || value === null || prop.startsWith("$")) return value;
      return new Proxy(value, {
        get(model, op) {
          const fn = Reflect.get(model, op);
          // A read of chosen columns is told apart from one of the whole row.
          const tag = (args: unknown[]) => `${prop}.${String(op)}${(args[0] as { select?: unknown } | undefined)?.select ? "(select)" : ""}`;
          return typeof fn === "function" ? (...args: unknown[]) => (calls.push(tag(args)), fn.apply(model, args)) : fn;
        },
      });
    },
  }) as Db;
});
afterAll(async () => {
  await reader?.close();
  await database?.close();
  await dropPg?.();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  calls.length = 0;
});

/** A scripted agent per server: acks, then answers with what `answer` says (or holds the job). */
function agents(answer: (env: JobEnvelope, serverId: number) => { ack?: JobAck | null; outcome?: (queue: JobQueue) => Promise<unknown> }) {
  const delivered: { serverId: number; envelope: JobEnvelope }[] = [];
  const cancelled: string[] = [];
  let queue: JobQueue;
  const dispatcher: JobDispatcher = {
    canDeliver: (id) => id === serverId || id === otherServerId,
    deliverable: () => [serverId, otherServerId],
    async deliver(id, envelope) {
      delivered.push({ serverId: id, envelope });
      const a = answer(envelope, id);
      if (a.outcome) setImmediate(() => void a.outcome!(queue));
      return a.ack === undefined ? { accepted: true } : a.ack;
    },
    cancel: (_id, jobId) => void cancelled.push(jobId),
  };
  queue = new JobQueue(db, pino({ level: "silent" }), { box, dialect: database.kind });
  queue.attachDispatcher(dispatcher);
  return { queue, delivered, cancelled };
}

const rowOf = (id: string) => database.prisma.job.findUniqueOrThrow({ where: { id } });

describe("job queue: the hot path", () => {
  it("run() to a connected agent: the row just written is claimed, committed, then delivered without a read of it", async () => {
    let seen: { status: string; attempt: number } | null = null;
    const queue = new JobQueue(db, pino({ level: "silent" }), { box, dialect: database.kind });
    const delivered: JobEnvelope[] = [];
    queue.attachDispatcher({
      canDeliver: (id) => id === serverId,
      deliverable: () => [serverId],
      async deliver(_id, env) {
        delivered.push(env);
        const before = calls.length;
        const row = await rowOf(env.id); // through the raw client: what another connection sees
        seen = { status: row.status, attempt: row.attempt };
        calls.length = before;
        setImmediate(() => void queue.applyOutcome(serverId, { id: env.id, attempt: env.attempt, ok: true, result: { containers: [] } }));
        return { accepted: true };
      },
      cancel: () => {},
    });
    const done = await queue.run(serverId, "containers.list", {});
    expect(done).toEqual({ id: delivered[0]!.id, status: "succeeded", result: { containers: [] } });
    // The row was committed, claimed at attempt 1, before the agent heard of it.
    expect(seen).toEqual({ status: "dispatched", attempt: 1 });
    expect(delivered[0]).toMatchObject({ attempt: 1, type: "containers.list", payload: {} });
    const row = await rowOf(done.id);
    expect(row).toMatchObject({ status: "succeeded", attempt: 1, result: JSON.stringify({ containers: [] }) });
    expect(row.finishedAt).toBeInstanceOf(Date);
    // INSERT and the outcome's fenced UPDATE: nothing else (no "running" mark for a job that
    // ended within RUNNING_MARK_DELAY_MS of its ack; but the waiter's fallback poll, which
    // reads after 500 ms on a slow machine).
    expect(calls.filter((c) => c !== "job.findUnique(select)")).toEqual(["$executeRawUnsafe", "$queryRawUnsafe"]);
  });

  it("jobs running together share their statements: fewer than one per job", async () => {
    const { queue } = agents((env, id) => ({ outcome: (q) => q.applyOutcome(id, { id: env.id, attempt: env.attempt, ok: true, result: { containers: [] } }) }));
    const all = await Promise.all(Array.from({ length: 60 }, (_, i) => queue.run(i % 2 ? serverId : otherServerId, "containers.list", {})));
    expect(all.every((r) => r.status === "succeeded")).toBe(true);
    expect(calls.length / 60).toBeLessThan(1);
  });

  it("an outcome is fenced by server, attempt and open status, also when grouped with others", async () => {
    const held: JobEnvelope[] = [];
    const { queue } = agents((env) => (held.push(env), {}));
    const a = queue.run(serverId, "containers.list", {});
    const b = queue.run(serverId, "containers.list", {});
    while (held.length < 2) await new Promise((r) => setImmediate(r));
    const [ja, jb] = held as [JobEnvelope, JobEnvelope];
    const results = await Promise.all([
      queue.applyOutcome(otherServerId, { id: ja.id, attempt: 1, ok: false, error: "another server's agent" }),
      queue.applyOutcome(serverId, { id: jb.id, attempt: 2, ok: false, error: "a stale or future attempt" }),
      queue.applyOutcome(serverId, { id: "no-such-job", attempt: 1, ok: false, error: "unknown" }),
      queue.applyOutcome(serverId, { id: ja.id, attempt: 1, ok: true, result: { containers: [] } }),
      queue.applyOutcome(serverId, { id: ja.id, attempt: 1, ok: false, error: "a duplicate after the first" }),
      queue.applyOutcome(serverId, { id: jb.id, attempt: 1, ok: true, result: { nonsense: true } }),
    ]);
    expect(results).toEqual([false, false, false, true, false, true]);
    expect(await a).toMatchObject({ status: "succeeded" });
    expect(await b).toMatchObject({ status: "failed", error: expect.stringMatching(/invalid result/) });
    expect((await rowOf(ja.id)).status).toBe("succeeded");
  });

  it("an acked job still running is marked running (grouped), a refused one fails with the reason", async () => {
    const held: JobEnvelope[] = [];
    const { queue } = agents((env) => {
      held.push(env);
      return env.type === "server.validate" ? { ack: { accepted: false, reason: "shutting down" } } : {};
    });
    const held1 = queue.run(serverId, "containers.list", {});
    const held2 = queue.run(otherServerId, "containers.list", {});
    const refused = await queue.run(serverId, "server.validate", {});
    expect(refused).toMatchObject({ status: "failed", error: "agent refused the job: shutting down" });
    const ids = held.filter((h) => h.type === "containers.list").map((h) => h.id);
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && (await database.prisma.job.count({ where: { id: { in: ids }, status: "running" } })) < 2) await new Promise((r) => setTimeout(r, 20));
    const rows = await database.prisma.job.findMany({ where: { id: { in: ids } } });
    expect(rows.map((r) => r.status)).toEqual(["running", "running"]);
    expect(rows.every((r) => r.startedAt instanceof Date)).toBe(true);
    for (const id of ids) await queue.cancel(id, "test over");
    expect((await Promise.all([held1, held2])).map((r) => r.status)).toEqual(["cancelled", "cancelled"]);
  });

  /**
   * run() to serverId while its agent is connected nowhere: the job is written queued. connect()
   * makes the agent reachable here; it then answers every delivery at once.
   */
  async function queuedRun(withReader: boolean) {
    let connected = false;
    const delivered: JobEnvelope[] = [];
    const queue = new JobQueue(db, pino({ level: "silent" }), { box, dialect: database.kind, ...(withReader ? { reader } : {}) });
    queue.attachDispatcher({
      canDeliver: (id) => connected && id === serverId,
      deliverable: () => (connected ? [serverId] : []),
      deliver: async (_id, env) => {
        delivered.push(env);
        setImmediate(() => void queue.applyOutcome(serverId, { id: env.id, attempt: env.attempt, ok: true, result: { containers: [] } }));
        return { accepted: true };
      },
      cancel: () => {},
    });
    const running = queue.run(serverId, "containers.list", {});
    let queued: { id: string; attempt: number } | undefined;
    for (const end = Date.now() + 5000; !queued && Date.now() < end; await new Promise((r) => setTimeout(r, 10))) {
      [queued] = await database.prisma.job.findMany({ where: { serverId, status: "queued" } });
    }
    return { queue, running, queued, delivered, connect: () => void (connected = true) };
  }

  for (const via of ["Prisma", "the plain read path"] as const) it(`run() for an agent not connected here writes the job queued; the hello's redelivery (read through ${via}) claims and sends it`, async () => {
    const { queue, running, queued, delivered, connect } = await queuedRun(via !== "Prisma");
    expect(queued).toMatchObject({ attempt: 0 });
    connect();
    await queue.redeliver(new Map([[serverId, Date.now()]]));
    expect(await running).toMatchObject({ id: queued!.id, status: "succeeded" });
    expect(delivered.filter((d) => d.id === queued!.id).map((d) => d.attempt)).toEqual([1]);
  });

  for (const backlog of [0, 1001]) it(`the pump delivers a job waiting for a server now connected here${backlog ? ", also behind a backlog larger than one read (chunked by connected servers)" : " (one read of the waiting jobs)"}`, async () => {
    // The backlog: jobs waiting for a server whose agent is connected nowhere.
    const far = new Date(Date.now() + 3_600_000);
    for (let i = 0; i < backlog; i += 500) {
      await database.prisma.job.createMany({
        data: Array.from({ length: Math.min(500, backlog - i) }, () => ({ id: randomUUID(), serverId: otherServerId, type: "containers.list", payload: "{}", status: "queued", attempt: 0, deadlineAt: far })),
      });
    }
    try {
      const { queue, running, queued, delivered, connect } = await queuedRun(true);
      expect(queued).toBeDefined();
      connect();
      await queue.tick();
      expect(await running).toMatchObject({ id: queued!.id, status: "succeeded" });
      expect(delivered.map((d) => d.id)).toEqual([queued!.id]);
    } finally {
      await database.prisma.job.deleteMany({ where: { serverId: otherServerId, status: "queued" } });
    }
  });

  it("cancel tells the agent through the dispatcher and wakes the waiter; outcome handlers get the row", async () => {
    const ended: { id: string; status: string; payload: string }[] = [];
    const { queue, cancelled } = agents(() => ({}));
    queue.useOutcomes(only("container.remove", async (job) => void ended.push({ id: job.id, status: job.status, payload: job.payload })));
    const waiting = queue.run(serverId, "container.remove", { name: "c1" });
    let id = "";
    while (!id) {
      id = (await database.prisma.job.findFirst({ where: { type: "container.remove", status: { in: ["dispatched", "running"] } } }))?.id ?? "";
      await new Promise((r) => setImmediate(r));
    }
    expect(await queue.cancel(id, "no longer wanted")).toBe(true);
    expect(cancelled).toEqual([id]);
    expect(await waiting).toEqual({ id, status: "cancelled", error: "no longer wanted" });
    expect(ended).toEqual([{ id, status: "cancelled", payload: JSON.stringify({ name: "c1" }) }]);
  });

  it("outcome handlers of a job finished by its agent's outcome get the row (read only for types with a handler)", async () => {
    const ended: string[] = [];
    const { queue } = agents((env, id) => ({
      outcome: (q) => q.applyOutcome(id, { id: env.id, attempt: env.attempt, ok: true, result: env.type === "container.remove" ? { removed: true } : { containers: [] } }),
    }));
    queue.useOutcomes(only("container.remove", async (job) => void ended.push(`${job.type} ${job.status} ${job.result}`)));
    await queue.run(serverId, "container.remove", { name: "c2" });
    expect(ended).toEqual([`container.remove succeeded ${JSON.stringify({ removed: true })}`]);
    expect(calls).toContain("job.findUnique");
    calls.length = 0;
    await queue.run(serverId, "containers.list", {});
    expect(calls).not.toContain("job.findUnique");
  });

  it("an ended job's outcome is marked applied: at once for a type without a handler, after its handler otherwise", async () => {
    const { queue } = agents((env, id) => ({
      outcome: (q) => q.applyOutcome(id, { id: env.id, attempt: env.attempt, ok: true, result: env.type === "container.remove" ? { removed: true } : { containers: [] } }),
    }));
    let handled = 0;
    queue.useOutcomes(only("container.remove", async () => void handled++));
    const listed = await queue.run(serverId, "containers.list", {});
    const removed = await queue.run(serverId, "container.remove", { name: "c3" });
    await queue.stop();
    const rows = await database.prisma.job.findMany({ where: { id: { in: [listed.id, removed.id] } } });
    expect(handled).toBe(1);
    expect(rows.map((r) => [r.type, r.outcomeAppliedAt !== null]).sort()).toEqual([["container.remove", true], ["containers.list", true]]);
  });

  it("the repair sweep applies an outcome its replica left unapplied (handler failed, or the replica died), once, after the lease", async () => {
    const { queue } = agents((env, id) => ({ outcome: (q) => q.applyOutcome(id, { id: env.id, attempt: env.attempt, ok: true, result: { removed: true } }) }));
    const seen: string[] = [];
    let fail = true;
    queue.useOutcomes(
      only("container.remove", async (job) => {
        seen.push(job.id);
        if (fail) throw new Error("the replica went away");
      }),
    );
    queue.outcomeLeaseMs = 200;
    const job = await queue.run(serverId, "container.remove", { name: "c4" });
    expect(seen).toEqual([job.id]);
    expect((await database.prisma.job.findUniqueOrThrow({ where: { id: job.id } })).outcomeAppliedAt).toBeNull();
    fail = false;
    // Within the lease the replica that ended it still holds it: no other sweep takes it.
    expect(await queue.applyMissedOutcomes()).toBe(0);
    await new Promise((r) => setTimeout(r, 250));
    // Two sweeps at once (two replicas): one claims it, one applies it.
    const other = new JobQueue(db, pino({ level: "silent" }), { box, dialect: database.kind });
    other.useOutcomes(only("container.remove", async (j) => void seen.push(`other ${j.id}`)));
    other.outcomeLeaseMs = 200;
    const applied = await Promise.all([queue.applyMissedOutcomes(), other.applyMissedOutcomes()]);
    expect(applied.reduce((a, b) => a + b, 0)).toBe(1);
    expect(seen.slice(1).map((s) => s.replace("other ", ""))).toEqual([job.id]);
    await Promise.all([queue.stop(), other.stop()]);
    expect((await database.prisma.job.findUniqueOrThrow({ where: { id: job.id } })).outcomeAppliedAt).not.toBeNull();
    expect(await queue.applyMissedOutcomes()).toBe(0);
  });
});

/** An outcome map with one handler; every other type has nothing to apply. */
function only<T extends JobType>(type: T, handler: OutcomeHandler<T>): OutcomeMap {
  const none = Object.fromEntries(JOB_TYPES.map((t) => [t, null])) as unknown as OutcomeMap;
  return { ...none, [type]: handler };
}
