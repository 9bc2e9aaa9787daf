import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JOBS } from "@capstan/shared";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { ok, until } from "./support/applications.js";
import { backupWorld, type BackupWorld } from "./support/backups.js";
import { startReplica, type Replica } from "./support/replica.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";
import type { BackupService } from "../../control-plane/src/services/backups/index.js";

/**
 * The backup scheduler with two control-plane replicas on one PostgreSQL database: both run
 * every schedule's cron task, and each tick starts exactly one backup (claimed through the
 * unique (schedule, tick minute) index). Ticks are fired directly (the scheduler's own tick
 * function) for the concurrency checks, and once by the real clock.
 *
 * Several replicas need PostgreSQL; on SQLite (one replica) the same races run inside one
 * instance: two ticks of one minute at once still make one run. (Two SQLite clients in one test
 * process cannot race writes: better-sqlite3 waits for the file lock synchronously, blocking the
 * other client's commit in the same event loop.)
 */
const pgUrl = process.env.CAPSTAN_TEST_PG_URL;
let t: TestInstance;
/** The second replica: another instance on PostgreSQL, the same instance on SQLite. */
let b: Pick<Replica, "instance">;
let replica: Replica | null = null;
const extra: Replica[] = [];
let s3: S3Server;
let w: BackupWorld;
const keys = new KeyFactory();

type Claim = Awaited<ReturnType<BackupService["claimTick"]>>;
/** Records every claim a replica's scheduler makes (the scheduler calls the service's claimTick). */
function recordClaims(svc: BackupService): Claim[] {
  const seen: Claim[] = [];
  const original = svc.claimTick.bind(svc);
  svc.claimTick = async (id, at) => {
    const r = await original(id, at);
    seen.push(r);
    return r;
  };
  return seen;
}

beforeAll(async () => {
  s3 = await startS3Server();
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
  replica = pgUrl ? await startReplica(t) : null;
  b = replica ?? { instance: t.instance };
  w = await backupWorld(t, keys, s3);
});
// No schedule of one test may tick into the next one (the real-clock test counts every claim).
afterEach(async () => {
  await t.instance.database.prisma.backupSchedule.updateMany({ data: { enabled: false } });
  await t.instance.backupScheduler.reconcile();
  await b.instance.backupScheduler.reconcile();
});
afterAll(async () => {
  w?.agent?.close();
  for (const r of extra) await r.close();
  await replica?.close();
  await t?.close();
  await s3?.stop();
  keys.cleanup();
});

async function newSchedule(frequency: string): Promise<{ uuid: string; id: number }> {
  const s = await ok(w.api.post(`/databases/${w.database.uuid}/backups`, { frequency, s3_storage_id: w.storage.id }), "schedule");
  const row = await t.instance.database.prisma.backupSchedule.findUniqueOrThrow({ where: { uuid: s.data.uuid } });
  return { uuid: s.data.uuid, id: row.id };
}

const executionsOf = (scheduleId: number) => t.instance.database.prisma.backupExecution.findMany({ where: { scheduleId }, orderBy: { id: "asc" } });

describe("one run per tick across replicas", () => {
  it("both replicas fire the same minute: one claims it, the other loses; one job per tick", async () => {
    const s = await newSchedule("0 * * * *");
    const minutes = ["2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z", "2026-03-01T12:00:00Z"].map((m) => new Date(m));
    for (const minute of minutes) {
      // Seconds apart inside the same minute, as two replicas' clocks would be.
      const results = await Promise.all([
        t.instance.backupScheduler.fire(s.id, new Date(minute.getTime() + 150)),
        b.instance.backupScheduler.fire(s.id, new Date(minute.getTime() + 2_500)),
      ]);
      expect(results.sort()).toEqual(["lost", "started"]);
      const job = await w.agent.nextJob(10_000);
      expect(job.type).toBe("db.backup");
      const p = JOBS["db.backup"].payload.parse(job.payload);
      await w.agent.outcome({
        id: job.id,
        attempt: job.attempt,
        ok: true,
        result: { filename: p.filename, size: 10, is_encrypted: true, local_path: `/x/${p.filename}`, s3_key: `${p.s3!.prefix}${p.filename}`, removed_local: [], removed_remote: [] },
      });
      await until(async () => (await executionsOf(s.id)).every((e) => e.status === "success"));
    }
    const rows = await executionsOf(s.id);
    expect(rows.map((r) => r.scheduledFor?.toISOString())).toEqual(minutes.map((m) => m.toISOString()));
    expect(rows.every((r) => r.trigger === "schedule" && r.jobId)).toBe(true);
    const jobs = await t.instance.database.prisma.job.count({ where: { id: { in: rows.map((r) => r.jobId!) } } });
    expect(jobs).toBe(3);
    // A tick that comes again (a replica's clock behind) finds its minute taken.
    expect(await b.instance.backupScheduler.fire(s.id, minutes[0]!)).toBe("lost");
    expect((await executionsOf(s.id)).length).toBe(3);
  });

  it("a tick while the previous run still runs is recorded as failed with the reason, once", async () => {
    const s = await newSchedule("*/5 * * * *");
    const m1 = new Date("2026-03-02T10:00:00Z");
    const m2 = new Date("2026-03-02T10:05:00Z");
    expect(await t.instance.backupScheduler.fire(s.id, m1)).toBe("started");
    const job = await w.agent.nextJob(10_000);
    const results = await Promise.all([t.instance.backupScheduler.fire(s.id, m2), b.instance.backupScheduler.fire(s.id, m2)]);
    expect(results.sort()).toEqual(["failed", "lost"]);
    const rows = await executionsOf(s.id);
    expect(rows.map((r) => [r.status, r.reason])).toEqual([
      ["queued", null],
      ["failed", "the previous backup of this schedule is still running"],
    ]);
    await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: false, error: "stopped by the test" });
    await until(async () => (await executionsOf(s.id))[0]!.status === "failed");
  });

  it("a disabled or deleted schedule's tick starts nothing", async () => {
    const s = await newSchedule("@daily");
    await ok(w.api.patch(`/databases/${w.database.uuid}/backups/${s.uuid}`, { enabled: false }), "disable");
    expect(await b.instance.backupScheduler.fire(s.id, new Date("2026-03-03T00:00:00Z"))).toBe("skipped");
    await ok(w.api.delete(`/databases/${w.database.uuid}/backups/${s.uuid}`), "delete");
    expect(await t.instance.backupScheduler.fire(s.id, new Date("2026-03-04T00:00:00Z"))).toBe("skipped");
    expect(await t.instance.database.prisma.backupExecution.count({ where: { scheduleId: s.id } })).toBe(0);
  });
});

describe.skipIf(!pgUrl)("schedule changes reach every replica", () => {
  it("this replica at once, the other one on its reconcile", async () => {
    const s = await newSchedule("15 4 * * *");
    // Created through A: A runs it now.
    await until(async () => t.instance.backupScheduler.watched().includes(s.id), 5_000);
    await b.instance.backupScheduler.reconcile();
    expect(b.instance.backupScheduler.watched()).toContain(s.id);
    expect(b.instance.backupScheduler.nextRun(s.id, "15 4 * * *")?.getUTCHours()).toBe(4);

    await ok(w.api.patch(`/databases/${w.database.uuid}/backups/${s.uuid}`, { enabled: false }), "disable");
    await until(async () => !t.instance.backupScheduler.watched().includes(s.id), 5_000);
    expect(b.instance.backupScheduler.watched()).toContain(s.id);
    await b.instance.backupScheduler.reconcile();
    expect(b.instance.backupScheduler.watched()).not.toContain(s.id);
  });

  it("a replica that stops drops its cron tasks", async () => {
    const c = await startReplica(t);
    // Closed with the others at the end: closing a replica now would also drop the agent's socket
    // on replica A (the gateway's disconnect goes through the cluster adapter), and later tests need it.
    extra.push(c);
    const s = await newSchedule("@hourly");
    await c.instance.backupScheduler.reconcile();
    expect(c.instance.backupScheduler.watched()).toContain(s.id);
    await c.instance.backupScheduler.stop();
    expect(c.instance.backupScheduler.watched()).toEqual([]);
    await c.instance.backupScheduler.reconcile();
    expect(c.instance.backupScheduler.watched()).toEqual([]);
    await ok(w.api.delete(`/databases/${w.database.uuid}/backups/${s.uuid}`), "delete");
  });
});

describe("the real clock", () => {
  it("an every-minute schedule runs at the next minute, once (on PostgreSQL although both replicas tick)", async () => {
    const claimsA = recordClaims(t.instance.services.backups);
    const claimsB = replica ? recordClaims(replica.instance.services.backups) : [];
    const replicas = replica ? 2 : 1;
    const s = await newSchedule("* * * * *");
    await b.instance.backupScheduler.reconcile();
    expect(t.instance.backupScheduler.watched()).toContain(s.id);
    expect(b.instance.backupScheduler.watched()).toContain(s.id);
    const job = await w.agent.nextJob(75_000);
    expect(job.type).toBe("db.backup");
    // Disable before the next minute so a slow run does not see a second tick.
    await ok(w.api.patch(`/databases/${w.database.uuid}/backups/${s.uuid}`, { enabled: false }), "disable");
    await b.instance.backupScheduler.reconcile();
    await until(async () => claimsA.length + claimsB.length >= replicas, 10_000);
    // Each replica's cron task fired; one started the backup.
    expect([...claimsA, ...claimsB].sort()).toEqual(replica ? ["lost", "started"] : ["started"]);
    const rows = await executionsOf(s.id);
    expect(rows.length).toBe(1);
    expect(rows[0]!.trigger).toBe("schedule");
    expect(rows[0]!.scheduledFor!.getUTCSeconds()).toBe(0);
    expect(Math.abs(rows[0]!.scheduledFor!.getTime() - Date.now())).toBeLessThan(60_000);
    await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: false, error: "stopped by the test" });
  }, 100_000);
});
