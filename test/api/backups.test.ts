import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { JOBS, type JobEnvelope } from "@capstan/shared";
import { startTestInstance, type ApiClient, type ApiResponse, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { ok, until } from "./support/applications.js";
import { backupWorld, type BackupWorld } from "./support/backups.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";

/**
 * Database backup schedules, executions and restores through the real API on a real database;
 * the server's agent is the scripted one (the real agent's dumps run in test/e2e). The S3
 * storage points at a real S3 server; these tests check what the control plane sends and how
 * it applies what comes back.
 */
let t: TestInstance;
let s3: S3Server;
const keys = new KeyFactory();
/** Response bodies, to check no secret ever appears in one. */
const seen: string[] = [];
const track = async <T = any>(p: Promise<ApiResponse<T>>): Promise<ApiResponse<T>> => {
  const r = await p;
  seen.push(JSON.stringify(r.body ?? null));
  return r;
};
const worlds: BackupWorld[] = [];
/** A second bucket on the same S3 server, for a second storage. */
const OTHER_BUCKET = "capstan-other";

beforeAll(async () => {
  s3 = await startS3Server({ buckets: ["capstan-backups", OTHER_BUCKET] });
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
});
afterAll(async () => {
  for (const w of worlds) w.agent?.close();
  await t?.close();
  await s3?.stop();
  keys.cleanup();
});

async function world(opts: { agent?: boolean } = {}): Promise<BackupWorld> {
  const w = await backupWorld(t, keys, s3, opts);
  worlds.push(w);
  return w;
}

const base = (w: BackupWorld) => `/databases/${w.database.uuid}/backups`;

async function schedule(w: BackupWorld, body: Record<string, unknown> = {}, api: ApiClient = w.api) {
  const r = await track(api.post(base(w), { frequency: "0 3 * * *", s3_storage_id: w.storage.id, number_of_backups_remote: 5, ...body }));
  if (r.status !== 201) throw new Error(`schedule: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.data as { uuid: string; [k: string]: unknown };
}

async function executions(w: BackupWorld, backupUuid: string): Promise<any[]> {
  return (await ok(track(w.api.get(`${base(w)}/${backupUuid}/executions`)), "executions")).data;
}

/** A successful db.backup result for a job, as the real agent reports it. */
function backupResult(job: JobEnvelope, extra: Partial<Record<string, unknown>> = {}) {
  const p = JOBS["db.backup"].payload.parse(job.payload);
  return {
    filename: p.filename,
    size: 123_456,
    is_encrypted: p.passphrase !== null,
    local_path: `/var/lib/capstan-agent/backups/${p.db.uuid}/${p.schedule_uuid}/${p.filename}`,
    s3_key: p.s3 ? `${p.s3.prefix}${p.filename}` : null,
    removed_local: [],
    removed_remote: [],
    ...extra,
  };
}

/** Runs the schedule once (execute), answers the job with `answer`, waits until the execution ended. */
async function runOnce(w: BackupWorld, backupUuid: string, answer: (job: JobEnvelope) => { result: unknown } | { error: string }) {
  const queued = await track(w.api.post(`${base(w)}/${backupUuid}/execute`));
  expect(queued.status, JSON.stringify(queued.body)).toBe(200);
  const job = await w.agent.nextJob(10_000);
  expect(job.type).toBe("db.backup");
  const a = answer(job);
  if ("error" in a) await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: false, error: a.error });
  else await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: a.result });
  const uuid = queued.body.execution_uuid as string;
  await until(async () => ["success", "failed"].includes((await executions(w, backupUuid)).find((e) => e.uuid === uuid)?.status));
  return { uuid, job, execution: (await executions(w, backupUuid)).find((e) => e.uuid === uuid) };
}

describe("schedules", () => {
  it("create, read, list, change, delete; defaults as the spec says", async () => {
    const w = await world({ agent: false });
    const created = await track(w.api.post(base(w), { frequency: "0 3 * * *" }));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const s = created.body.data;
    expect(s).toMatchObject({
      uuid: expect.any(String),
      database_uuid: w.database.uuid,
      frequency: "0 3 * * *",
      enabled: true,
      s3_storage_id: null,
      number_of_backups_locally: 7,
      number_of_backups_remote: null,
      last_execution: null,
    });
    // The next 03:00 UTC.
    const next = new Date(s.next_run_at);
    expect(next.getUTCHours()).toBe(3);
    expect(next.getUTCMinutes()).toBe(0);
    expect(next.getTime() - Date.now()).toBeLessThanOrEqual(24 * 3600_000);
    expect(next.getTime()).toBeGreaterThan(Date.now());

    expect((await track(w.api.get(`${base(w)}/${s.uuid}`))).body).toEqual(s);
    const list = (await track(w.api.get(base(w)))).body;
    expect(list.data).toEqual([s]);
    // The database's detail shows its schedules (not tracked: it shows its owner the credentials).
    expect((await w.api.get(`/databases/${w.database.uuid}`)).body.backup_schedules).toEqual([s]);

    const changed = await track(
      w.api.patch(`${base(w)}/${s.uuid}`, { frequency: "@hourly", s3_storage_id: w.storage.id, number_of_backups_locally: 0, number_of_backups_remote: 30, enabled: false }),
    );
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(changed.body.data).toMatchObject({ frequency: "@hourly", s3_storage_id: w.storage.id, number_of_backups_locally: 0, number_of_backups_remote: 30, enabled: false, next_run_at: null });
    const storage = (await track(w.api.get(`/s3-storages/${w.storage.id}`))).body;
    expect(storage.schedule_count).toBe(1);
    // The storage is in use now.
    expect((await track(w.api.delete(`/s3-storages/${w.storage.id}`))).status).toBe(409);

    // Dropping the storage needs local copies again, and drops remote retention with it.
    const local0 = await track(w.api.patch(`${base(w)}/${s.uuid}`, { s3_storage_id: null }));
    expect(local0.status).toBe(422);
    expect(Object.keys(local0.body.errors)).toEqual(["number_of_backups_locally"]);
    const dropped = await track(w.api.patch(`${base(w)}/${s.uuid}`, { s3_storage_id: null, number_of_backups_locally: 3, enabled: true }));
    expect(dropped.body.data).toMatchObject({ s3_storage_id: null, number_of_backups_remote: null, number_of_backups_locally: 3, enabled: true });
    expect(new Date(dropped.body.data.next_run_at).getUTCMinutes()).toBe(0);

    expect((await track(w.api.delete(`${base(w)}/${s.uuid}`))).status).toBe(200);
    expect((await track(w.api.get(`${base(w)}/${s.uuid}`))).status).toBe(404);
    expect((await track(w.api.get(base(w)))).body.data).toEqual([]);
    expect((await track(w.api.delete(`/s3-storages/${w.storage.id}`))).status).toBe(200);
  });

  it("refuses a bad cron, bad counts, and unknown or another team's storage; nothing is created", async () => {
    const w = await world({ agent: false });
    const other = await world({ agent: false });
    const count = () => t.instance.database.prisma.backupSchedule.count({ where: { databaseId: w.database.id } });
    const cases: [Record<string, unknown>, number, string?][] = [
      [{ frequency: "61 * * * *" }, 422, "frequency"],
      [{ frequency: "* * * *" }, 422, "frequency"],
      [{ frequency: "*/5 * * * * *" }, 422, "frequency"],
      [{ frequency: "0 0 31 2 *" }, 422, "frequency"],
      [{ frequency: "@every_minute" }, 422, "frequency"],
      [{ frequency: "" }, 422, "frequency"],
      [{ frequency: "0 3 * * *; rm -rf /" }, 422, "frequency"],
      [{}, 422, "frequency"],
      [{ frequency: "@daily", number_of_backups_locally: -1 }, 422, "number_of_backups_locally"],
      [{ frequency: "@daily", number_of_backups_locally: 1.5 }, 422, "number_of_backups_locally"],
      [{ frequency: "@daily", number_of_backups_locally: 0 }, 422, "number_of_backups_locally"],
      [{ frequency: "@daily", s3_storage_id: w.storage.id, number_of_backups_remote: 0 }, 422, "number_of_backups_remote"],
      [{ frequency: "@daily", s3_storage_id: w.storage.id, number_of_backups_remote: -3 }, 422, "number_of_backups_remote"],
      [{ frequency: "@daily", number_of_backups_remote: 3 }, 422, "number_of_backups_remote"],
      [{ frequency: "@daily", s3_storage_id: "1" }, 422, "s3_storage_id"],
      [{ frequency: "@daily", enabled: "yes" }, 422, "enabled"],
      [{ frequency: "@daily", s3_storage_id: 2_000_000_000 }, 404],
      [{ frequency: "@daily", s3_storage_id: other.storage.id }, 404],
      [{ frequency: "@daily", keep_locally: 3 }, 422, "keep_locally"],
    ];
    for (const [body, status, field] of cases) {
      const r = await track(w.api.post(base(w), body));
      expect(r.status, `${JSON.stringify(body)} -> ${JSON.stringify(r.body)}`).toBe(status);
      if (field) expect(Object.keys(r.body.errors ?? {}), JSON.stringify(body)).toContain(field);
      if (status === 404) {
        expect(r.body).toEqual({ message: "S3 storage not found." });
        expect(JSON.stringify(r.body)).not.toContain(other.storage.passphrase);
      }
    }
    expect(await count()).toBe(0);

    const s = await schedule(w);
    for (const [body, status] of [
      [{ frequency: "nope" }, 422],
      [{ s3_storage_id: other.storage.id }, 404],
      [{ number_of_backups_locally: -1 }, 422],
      [{}, 422],
      [{ frequncy: "@daily" }, 422],
    ] as const) {
      expect((await track(w.api.patch(`${base(w)}/${s.uuid}`, body))).status, JSON.stringify(body)).toBe(status);
    }
    expect((await track(w.api.get(`${base(w)}/${s.uuid}`))).body).toMatchObject({ frequency: "0 3 * * *", s3_storage_id: w.storage.id, number_of_backups_locally: 7 });
    // Macros and ranges node-cron knows are fine.
    for (const frequency of ["@weekly", "@monthly", "@yearly", "@midnight", "*/15 2-5 * * 1-5", "0 0 1 jan,jul *"]) {
      const r = await track(w.api.patch(`${base(w)}/${s.uuid}`, { frequency }));
      expect(r.status, `${frequency}: ${JSON.stringify(r.body)}`).toBe(200);
      expect(r.body.data.next_run_at).not.toBeNull();
    }
  });

  it("another team's database, schedule and execution are 404 everywhere", async () => {
    const a = await world();
    const b = await world({ agent: false });
    const s = await schedule(a);
    const { uuid: exec } = await runOnce(a, s.uuid, (job) => ({ result: backupResult(job) }));
    const paths: [string, "get" | "post" | "patch" | "delete", unknown?][] = [
      [base(a), "get"],
      [base(a), "post", { frequency: "@daily" }],
      [`${base(a)}/${s.uuid}`, "get"],
      [`${base(a)}/${s.uuid}`, "patch", { enabled: false }],
      [`${base(a)}/${s.uuid}/execute`, "post"],
      [`${base(a)}/${s.uuid}/executions`, "get"],
      [`${base(a)}/${s.uuid}/executions/${exec}/restore`, "post", {}],
      [`${base(a)}/${s.uuid}/executions/${exec}`, "delete"],
      [`${base(a)}/${s.uuid}`, "delete"],
      // B's own database with A's schedule / execution in the path.
      [`${base(b)}/${s.uuid}`, "get"],
      [`${base(b)}/${s.uuid}/executions`, "get"],
      [`${base(b)}/${s.uuid}/executions/${exec}`, "delete"],
    ];
    const before = await executions(a, s.uuid);
    for (const [path, method, body] of paths) {
      const r = await track(method === "get" ? b.api.get(path) : b.api[method](path, body));
      expect(r.status, `${method} ${path}: ${JSON.stringify(r.body)}`).toBe(404);
      for (const marker of [s.uuid, exec, a.database.uuid]) expect(JSON.stringify(r.body)).not.toContain(marker);
    }
    expect(await executions(a, s.uuid)).toEqual(before);
    expect((await track(a.api.get(`${base(a)}/${s.uuid}`))).body.enabled).toBe(true);
    expect(a.agent.jobs.filter((j) => j.type !== "server.prepare").length).toBe(1);
  });

  it("members: view lists, deploy runs, full access changes and restores; a read token changes nothing", async () => {
    const w = await world();
    const s = await schedule(w);
    const { uuid: exec } = await runOnce(w, s.uuid, (job) => ({ result: backupResult(job) }));
    const grant = async (level: string) => {
      const m = await t.newMember(w.team.teamId, "member");
      await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: m.userId, permission_level: level }), "grant");
      return t.api(m.token);
    };
    const viewer = await grant("view_only");
    const deployer = await grant("deploy");
    const full = await grant("full_access");
    const readToken = t.api((await t.newMember(w.team.teamId, "owner", ["read"])).token);
    const outsider = t.api((await t.newMember(w.team.teamId, "member")).token);

    expect((await track(viewer.get(base(w)))).status).toBe(200);
    expect((await track(viewer.get(`${base(w)}/${s.uuid}/executions`))).status).toBe(200);
    expect((await track(outsider.get(base(w)))).status).toBe(404);
    for (const api of [viewer, deployer, readToken]) {
      expect((await track(api.post(base(w), { frequency: "@daily" }))).status).toBe(403);
      expect((await track(api.patch(`${base(w)}/${s.uuid}`, { enabled: false }))).status).toBe(403);
      expect((await track(api.delete(`${base(w)}/${s.uuid}/executions/${exec}`))).status).toBe(403);
      expect((await track(api.post(`${base(w)}/${s.uuid}/executions/${exec}/restore`))).status).toBe(403);
      expect((await track(api.delete(`${base(w)}/${s.uuid}`))).status).toBe(403);
    }
    for (const api of [viewer, readToken]) expect((await track(api.post(`${base(w)}/${s.uuid}/execute`))).status).toBe(403);
    expect(w.agent.jobs.filter((j) => j.type === "db.backup").length).toBe(1);

    // deploy level runs a backup; full access creates schedules.
    const run = await track(deployer.post(`${base(w)}/${s.uuid}/execute`));
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    const job = await w.agent.nextJob(10_000);
    await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: backupResult(job) });
    expect((await track(full.post(base(w), { frequency: "@daily" }))).status).toBe(201);
    expect((await executions(w, s.uuid)).length).toBe(2);
  });
});

describe("runs", () => {
  it("execute sends db.backup with the database, the storage and the passphrase; the result lands on the execution", async () => {
    const w = await world();
    const s = await schedule(w, { number_of_backups_locally: 2 });
    const queued = await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    expect(queued.status).toBe(200);
    expect(queued.body).toEqual({ message: expect.any(String), execution_uuid: expect.any(String) });
    const job = await w.agent.nextJob(10_000);
    expect(job.type).toBe("db.backup");
    const p = JOBS["db.backup"].payload.parse(job.payload);
    expect(p).toMatchObject({
      db: { uuid: w.database.uuid, name: w.database.name },
      engine: "postgresql",
      credentials: w.credentials,
      schedule_uuid: s.uuid,
      execution_uuid: queued.body.execution_uuid,
      keep_locally: 2,
      passphrase: w.storage.passphrase,
      s3: {
        target: { endpoint: s3.endpoint, region: "us-east-1", bucket: s3.bucket, path_style: true, access_key: s3.accessKey, secret_key: s3.secretKey, allow_private: true },
        prefix: `capstan/prod/${w.database.uuid}/`,
        keep_remote: 5,
      },
    });
    expect(p.filename).toMatch(new RegExp(`^postgresql-\\d{8}T\\d{6}Z-${queued.body.execution_uuid.slice(0, 8)}\\.sql\\.gz\\.gpg$`));

    // The agent took the job: the execution shows running.
    await until(async () => (await executions(w, s.uuid))[0]?.status === "running");
    const [running] = await executions(w, s.uuid);
    expect(running).toMatchObject({ uuid: queued.body.execution_uuid, trigger: "manual", scheduled_for: null, filename: p.filename, is_encrypted: true, finished_at: null });
    // A second run while one runs is refused.
    expect((await track(w.api.post(`${base(w)}/${s.uuid}/execute`))).status).toBe(409);
    // And the execution cannot be deleted while it runs.
    expect((await track(w.api.delete(`${base(w)}/${s.uuid}/executions/${running.uuid}`))).status).toBe(409);

    await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: backupResult(job, { size: 5_000_000_123 }) });
    await until(async () => (await executions(w, s.uuid))[0]?.status === "success");
    const [done] = await executions(w, s.uuid);
    expect(done).toMatchObject({
      status: "success",
      filename: p.filename,
      size: 5_000_000_123,
      is_encrypted: true,
      s3_storage_id: w.storage.id,
      s3_key: `capstan/prod/${w.database.uuid}/${p.filename}`,
      stored_locally: true,
      reason: null,
      restore_status: null,
    });
    expect(Date.parse(done.finished_at)).toBeGreaterThanOrEqual(Date.parse(done.created_at));
    const sched = (await track(w.api.get(`${base(w)}/${s.uuid}`))).body;
    expect(sched.last_execution).toEqual({ uuid: done.uuid, status: "success", created_at: done.created_at, finished_at: done.finished_at });
  });

  it("a failed dump is failed with the agent's reason (never a false success)", async () => {
    const w = await world();
    const s = await schedule(w);
    const { execution } = await runOnce(w, s.uuid, () => ({ error: "pg_dump: error: connection to server failed: FATAL: password authentication failed" }));
    expect(execution).toMatchObject({ status: "failed", reason: expect.stringContaining("password authentication failed"), s3_key: null, stored_locally: false, size: null });
    // An invalid result is a failure too.
    const { execution: bad } = await runOnce(w, s.uuid, () => ({ result: { filename: "x" } }));
    expect(bad.status).toBe("failed");
    expect(bad.reason).toMatch(/invalid result/);
  });

  it("without a storage the backup stays on the server, unencrypted", async () => {
    const w = await world();
    const s = await schedule(w, { s3_storage_id: null, number_of_backups_remote: null, number_of_backups_locally: 3 });
    const { job, execution } = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j) }));
    const p = JOBS["db.backup"].payload.parse(job.payload);
    expect(p).toMatchObject({ s3: null, passphrase: null, keep_locally: 3 });
    expect(p.filename).toMatch(/\.sql\.gz$/);
    expect(execution).toMatchObject({ status: "success", s3_storage_id: null, s3_key: null, stored_locally: true, is_encrypted: false });
  });

  it("retention results clear the removed backups' places", async () => {
    const w = await world();
    const s = await schedule(w, { number_of_backups_locally: 1, number_of_backups_remote: 1 });
    const first = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j) }));
    expect(first.execution).toMatchObject({ stored_locally: true, s3_key: expect.any(String) });
    // The second run removes the first one's file (by name) and object (by key), as the agent reports.
    const second = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j, { removed_local: [first.execution.filename], removed_remote: [first.execution.s3_key] }) }));
    const list = await executions(w, s.uuid);
    expect(list.map((e) => e.uuid)).toEqual([second.uuid, first.uuid]);
    expect(list[1]).toMatchObject({ status: "success", stored_locally: false, s3_key: null });
    expect(list[0]).toMatchObject({ status: "success", stored_locally: true, s3_key: expect.any(String) });
    // Without a file anywhere, a backup cannot be restored.
    const r = await track(w.api.post(`${base(w)}/${s.uuid}/executions/${first.uuid}/restore`));
    expect(r.status).toBe(409);
    expect(r.body.message).toMatch(/gone/);
  });

  it("a server whose agent is away: execute is refused, a cron tick is recorded as failed with the reason", async () => {
    const w = await world({ agent: false });
    const s = await schedule(w, { frequency: "* * * * *" });
    const r = await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    expect(r.status).toBe(409);
    expect(r.body.message).toMatch(/not reachable/);
    const row = await t.instance.database.prisma.backupSchedule.findUniqueOrThrow({ where: { uuid: s.uuid } });
    const tick = new Date("2026-01-01T03:00:00Z");
    expect(await t.instance.backupScheduler.fire(row.id, tick)).toBe("failed");
    const [e] = await executions(w, s.uuid);
    expect(e).toMatchObject({ status: "failed", trigger: "schedule", scheduled_for: tick.toISOString(), reason: expect.stringMatching(/not reachable/) });
    expect(await t.instance.database.prisma.job.count({ where: { type: "db.backup", server: { uuid: w.server.uuid } } })).toBe(0);
  });

  it("an agent that leaves mid-run: the execution fails at the job's deadline with the reason", async () => {
    const w = await world();
    const s = await schedule(w);
    const queued = await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    const job = await w.agent.nextJob(10_000);
    expect(job.type).toBe("db.backup");
    // The deadline passes (moved instead of waited for); the queue's sweep fails the job.
    await t.instance.database.prisma.job.update({ where: { id: job.id }, data: { deadlineAt: new Date(Date.now() - 1000) } });
    await until(async () => (await executions(w, s.uuid))[0]?.status === "failed");
    const [e] = await executions(w, s.uuid);
    expect(e.uuid).toBe(queued.body.execution_uuid);
    expect(e.reason).toMatch(/deadline exceeded/);
  });

  it("the sweep applies outcomes whose hook did not run, and fails runs whose job vanished", async () => {
    const w = await world();
    const s = await schedule(w);
    const db = t.instance.database.prisma;
    const q1 = await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    const job = await w.agent.nextJob(10_000);
    // The job ends behind the queue's back (as if the replica that ended it died before its hooks).
    await db.job.update({ where: { id: job.id }, data: { status: "succeeded", result: JSON.stringify(backupResult(job)), finishedAt: new Date() } });
    await t.instance.repairSweep.run();
    expect((await executions(w, s.uuid)).find((e) => e.uuid === q1.body.execution_uuid)).toMatchObject({ status: "success", stored_locally: true });

    const q2 = await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    const job2 = await w.agent.nextJob(10_000);
    await db.job.delete({ where: { id: job2.id } });
    await t.instance.repairSweep.run();
    expect((await executions(w, s.uuid)).find((e) => e.uuid === q2.body.execution_uuid)).toMatchObject({ status: "failed", reason: expect.stringMatching(/removed/) });
  });
});

describe("executions", () => {
  it("delete enqueues backup.delete for the file and the object, then the row is gone", async () => {
    const w = await world();
    const s = await schedule(w);
    const { uuid, execution } = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j) }));
    const del = await track(w.api.delete(`${base(w)}/${s.uuid}/executions/${uuid}`));
    expect(del.status).toBe(200);
    expect(del.body.message).toMatch(/being removed/);
    const job = await w.agent.nextJob(10_000);
    expect(job.type).toBe("backup.delete");
    const p = JOBS["backup.delete"].payload.parse(job.payload);
    expect(p.local_path).toMatch(new RegExp(`/${execution.filename.replace(/\./g, "\\.")}$`));
    expect(p.s3).toEqual({
      target: { endpoint: s3.endpoint, region: "us-east-1", bucket: s3.bucket, path_style: true, access_key: s3.accessKey, secret_key: s3.secretKey, allow_private: true },
      key: execution.s3_key,
    });
    await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { local_removed: true, remote_removed: true } });
    expect(await executions(w, s.uuid)).toEqual([]);
    expect((await track(w.api.delete(`${base(w)}/${s.uuid}/executions/${uuid}`))).status).toBe(404);

    // A failed run has no file: deleting it needs no job.
    const failed = await runOnce(w, s.uuid, () => ({ error: "boom" }));
    const before = w.agent.jobs.length;
    expect((await track(w.api.delete(`${base(w)}/${s.uuid}/executions/${failed.uuid}`))).body.message).toBe("Backup deleted.");
    await new Promise((r) => setTimeout(r, 300));
    expect(w.agent.jobs.length).toBe(before);
  });

  it("restore sends db.restore with where the file is and the passphrase; restore_status follows the job", async () => {
    const w = await world();
    const s = await schedule(w);
    const { uuid, execution } = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j) }));
    const path = `${base(w)}/${s.uuid}/executions/${uuid}/restore`;
    const r = await track(w.api.post(path));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ message: expect.any(String), execution_uuid: uuid });
    const job = await w.agent.nextJob(10_000);
    expect(job.type).toBe("db.restore");
    const p = JOBS["db.restore"].payload.parse(job.payload);
    expect(p).toEqual({
      db: { uuid: w.database.uuid, name: w.database.name },
      engine: "postgresql",
      credentials: w.credentials,
      from: {
        local_path: expect.stringMatching(new RegExp(`/${execution.filename.replace(/\./g, "\\.")}$`)),
        s3: { target: expect.objectContaining({ endpoint: s3.endpoint, bucket: s3.bucket, allow_private: true }), key: execution.s3_key },
      },
      passphrase: w.storage.passphrase,
    });
    await until(async () => (await executions(w, s.uuid))[0]?.restore_status === "running");
    // One restore at a time, and no backup run meanwhile.
    expect((await track(w.api.post(path))).status).toBe(409);
    expect((await track(w.api.post(`${base(w)}/${s.uuid}/execute`))).status).toBe(409);
    expect((await track(w.api.delete(`${base(w)}/${s.uuid}/executions/${uuid}`))).status).toBe(409);
    await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { bytes: 123_456 } });
    await until(async () => (await executions(w, s.uuid))[0]?.restore_status === "success");
    const [e] = await executions(w, s.uuid);
    expect(e).toMatchObject({ restore_status: "success", restore_reason: null, restored_at: expect.any(String) });

    // A failed restore says why; a later one can run again.
    expect((await track(w.api.post(path))).status).toBe(200);
    const job2 = await w.agent.nextJob(10_000);
    await w.agent.outcome({ id: job2.id, attempt: job2.attempt, ok: false, error: "gpg: decryption failed: Bad session key" });
    await until(async () => (await executions(w, s.uuid))[0]?.restore_status === "failed");
    expect((await executions(w, s.uuid))[0]).toMatchObject({ restore_reason: expect.stringContaining("Bad session key"), restored_at: null });
  });

  it("a backup and a restore of one database never both start: the check is repeated under the database's run lock", async () => {
    const w = await world();
    const s = await schedule(w);
    const { uuid } = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j) }));
    const restorePath = `${base(w)}/${s.uuid}/executions/${uuid}/restore`;
    // The two checks live in the lookups the backup service's parts share (services/backups/common.ts).
    const service = (t.instance.services.backups as unknown as { lookups: Record<"backupClash" | "restoreClash", (...a: unknown[]) => Promise<string | null>> }).lookups;

    // A backup is queued; a restore whose first look (before the transaction) came too early to
    // see it is still refused by the look inside the transaction.
    const queued = await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    expect(queued.status).toBe(200);
    const backupJob = await w.agent.nextJob(10_000);
    const early = vi.spyOn(service, "restoreClash").mockResolvedValueOnce(null);
    const refused = await track(w.api.post(restorePath));
    early.mockRestore();
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    expect(refused.body.message).toMatch(/A backup of this database is running/);
    expect((await executions(w, s.uuid)).find((e) => e.uuid === uuid)?.restore_status).toBeNull();
    await w.agent.outcome({ id: backupJob.id, attempt: backupJob.attempt, ok: true, result: backupResult(backupJob) });
    await until(async () => (await executions(w, s.uuid)).every((e) => e.status === "success"));

    // The other way round: a restore is queued; a manual backup that looked too early is refused.
    expect((await track(w.api.post(restorePath))).status).toBe(200);
    const restoreJob = await w.agent.nextJob(10_000);
    const executionsBefore = (await executions(w, s.uuid)).length;
    const late = vi.spyOn(service, "backupClash").mockResolvedValueOnce(null);
    const refusedBackup = await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    late.mockRestore();
    expect(refusedBackup.status, JSON.stringify(refusedBackup.body)).toBe(409);
    expect(refusedBackup.body.message).toMatch(/a restore of this database is running/);
    expect((await executions(w, s.uuid)).length).toBe(executionsBefore);
    await w.agent.outcome({ id: restoreJob.id, attempt: restoreJob.attempt, ok: true, result: { bytes: 1 } });
    await until(async () => (await executions(w, s.uuid)).find((e) => e.uuid === uuid)?.restore_status === "success");

    // Racing requests (on PostgreSQL, two connections at once): never both accepted.
    for (let round = 0; round < 5; round++) {
      const [b, r] = await Promise.all([track(w.api.post(`${base(w)}/${s.uuid}/execute`)), track(w.api.post(restorePath))]);
      expect([b.status, r.status].filter((x) => x === 200).length, `round ${round}: ${b.status} ${r.status}`).toBe(1);
      const job = await w.agent.nextJob(10_000);
      if (job.type === "db.backup") await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: backupResult(job) });
      else await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { bytes: 1 } });
      await until(async () => (await executions(w, s.uuid)).every((e) => e.status === "success" && e.restore_status !== "queued" && e.restore_status !== "running"));
    }
  });

  it("restoring an encrypted backup after the passphrase was removed needs the old one in the request", async () => {
    const w = await world();
    const s = await schedule(w);
    const { uuid } = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j) }));
    expect((await track(w.api.patch(`/s3-storages/${w.storage.id}`, { encryption_passphrase: null }))).status).toBe(200);
    const path = `${base(w)}/${s.uuid}/executions/${uuid}/restore`;
    const missing = await track(w.api.post(path));
    expect(missing.status).toBe(422);
    expect(Object.keys(missing.body.errors)).toEqual(["passphrase"]);
    expect((await track(w.api.post(path, { passphrase: "short" }))).status).toBe(422);
    const given = await track(w.api.post(path, { passphrase: w.storage.passphrase }));
    expect(given.status).toBe(200);
    const job = await w.agent.nextJob(10_000);
    expect(JOBS["db.restore"].payload.parse(job.payload).passphrase).toBe(w.storage.passphrase);
    // A failed backup has nothing to restore.
    await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { bytes: 1 } });
    const failed = await runOnce(w, s.uuid, () => ({ error: "boom" }));
    expect((await track(w.api.post(`${base(w)}/${s.uuid}/executions/${failed.uuid}/restore`))).status).toBe(409);
  });

  it("a schedule moves to another storage; each backup is restored, deleted and retained in the storage it went to", async () => {
    const w = await world();
    const s = await schedule(w, { number_of_backups_remote: 1 });
    const first = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j) }));
    expect(first.execution).toMatchObject({ status: "success", s3_storage_id: w.storage.id, s3_key: `capstan/prod/${w.database.uuid}/${first.execution.filename}` });

    // Storage B: another bucket, another passphrase. Moving there is fine while backups are in A.
    const passB = `other-pass-${w.storage.passphrase}`;
    const b = await ok(
      track(w.api.post("/s3-storages", { name: "b", endpoint: s3.endpoint, bucket: OTHER_BUCKET, path_prefix: "elsewhere", access_key: s3.accessKey, secret_key: s3.secretKey, encryption_passphrase: passB })),
      "storage b",
    );
    const moved = await track(w.api.patch(`${base(w)}/${s.uuid}`, { s3_storage_id: b.data.id }));
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect(moved.body.data.s3_storage_id).toBe(b.data.id);

    // The next run goes to B; A's backup keeps naming A.
    const second = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j) }));
    const p2 = JOBS["db.backup"].payload.parse(second.job.payload);
    expect(p2.s3).toMatchObject({ target: { bucket: OTHER_BUCKET }, prefix: `elsewhere/${w.database.uuid}/` });
    expect(p2.passphrase).toBe(passB);
    expect(second.execution).toMatchObject({ s3_storage_id: b.data.id, s3_key: `elsewhere/${w.database.uuid}/${p2.filename}` });
    expect((await executions(w, s.uuid)).find((e) => e.uuid === first.uuid)).toMatchObject({ s3_storage_id: w.storage.id, s3_key: first.execution.s3_key });

    // Restoring the first backup reads A (its bucket and its passphrase), not the schedule's B.
    const restore = await track(w.api.post(`${base(w)}/${s.uuid}/executions/${first.uuid}/restore`));
    expect(restore.status, JSON.stringify(restore.body)).toBe(200);
    const rjob = await w.agent.nextJob(10_000);
    const rp = JOBS["db.restore"].payload.parse(rjob.payload);
    expect(rp.from.s3).toEqual({ target: expect.objectContaining({ bucket: s3.bucket }), key: first.execution.s3_key });
    expect(rp.passphrase).toBe(w.storage.passphrase);
    await w.agent.outcome({ id: rjob.id, attempt: rjob.attempt, ok: true, result: { bytes: 1 } });
    await until(async () => (await executions(w, s.uuid)).find((e) => e.uuid === first.uuid)?.restore_status === "success");

    // Remote retention of a run to B clears only what B's bucket held: a key of A's bucket
    // reported by it (an object of the same name in another bucket) stays recorded.
    const third = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j, { removed_remote: [second.execution.s3_key, first.execution.s3_key] }) }));
    let list = await executions(w, s.uuid);
    expect(list.find((e) => e.uuid === second.uuid)).toMatchObject({ s3_storage_id: b.data.id, s3_key: null });
    expect(list.find((e) => e.uuid === first.uuid)).toMatchObject({ s3_storage_id: w.storage.id, s3_key: first.execution.s3_key });
    expect(list.find((e) => e.uuid === third.uuid)).toMatchObject({ s3_storage_id: b.data.id, s3_key: expect.any(String) });

    // Storage C is B's bucket again (re-created with other keys): retention of a run to C clears
    // the backups recorded under B, since they are the same objects.
    const c = await ok(
      track(w.api.post("/s3-storages", { name: "c", endpoint: s3.endpoint, bucket: OTHER_BUCKET, path_prefix: "elsewhere", access_key: s3.accessKey, secret_key: s3.secretKey, encryption_passphrase: passB })),
      "storage c",
    );
    expect((await track(w.api.patch(`${base(w)}/${s.uuid}`, { s3_storage_id: c.data.id }))).status).toBe(200);
    const fourth = await runOnce(w, s.uuid, (j) => ({ result: backupResult(j, { removed_remote: [third.execution.s3_key] }) }));
    list = await executions(w, s.uuid);
    expect(list.find((e) => e.uuid === third.uuid)).toMatchObject({ s3_storage_id: b.data.id, s3_key: null });
    expect(list.find((e) => e.uuid === fourth.uuid)).toMatchObject({ s3_storage_id: c.data.id, s3_key: expect.any(String) });

    // A holds the first backup's object: deleting A is refused and says so; B holds nothing now.
    const refused = await track(w.api.delete(`/s3-storages/${w.storage.id}`));
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/1 backup\(s\) have their object in it/);
    expect(refused.body.message).not.toMatch(/schedule/);
    expect((await track(w.api.get(`/s3-storages/${w.storage.id}`))).body).toMatchObject({ schedule_count: 0, backup_count: 1 });

    // Deleting the first backup removes its object from A (not from the schedule's C).
    expect((await track(w.api.delete(`${base(w)}/${s.uuid}/executions/${first.uuid}`))).status).toBe(200);
    const djob = await w.agent.nextJob(10_000);
    expect(djob.type).toBe("backup.delete");
    expect(JOBS["backup.delete"].payload.parse(djob.payload).s3).toEqual({ target: expect.objectContaining({ bucket: s3.bucket }), key: first.execution.s3_key });
    await w.agent.outcome({ id: djob.id, attempt: djob.attempt, ok: true, result: { local_removed: true, remote_removed: true } });
    expect((await track(w.api.delete(`/s3-storages/${w.storage.id}`))).status).toBe(200);
    expect((await track(w.api.delete(`/s3-storages/${b.data.id}`))).status).toBe(200);
    // The backups that went to B lost their storage record with it; C is still in use.
    list = await executions(w, s.uuid);
    expect(list.find((e) => e.uuid === second.uuid)).toMatchObject({ s3_storage_id: null, s3_key: null, stored_locally: true });
    expect((await track(w.api.delete(`/s3-storages/${c.data.id}`))).status).toBe(409);
  });

  it("a storage with a run uploading to it is not deleted, even after its schedule moved away", async () => {
    const w = await world();
    const s = await schedule(w);
    const queued = await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    const job = await w.agent.nextJob(10_000);
    expect((await track(w.api.patch(`${base(w)}/${s.uuid}`, { s3_storage_id: null, number_of_backups_locally: 2 }))).status).toBe(200);
    const refused = await track(w.api.delete(`/s3-storages/${w.storage.id}`));
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/1 backup run\(s\) are uploading to it/);
    // The run ends: its object is recorded in the storage it went to, which still refuses.
    await w.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: backupResult(job) });
    await until(async () => (await executions(w, s.uuid))[0]?.status === "success");
    expect((await executions(w, s.uuid))[0]).toMatchObject({ uuid: queued.body.execution_uuid, s3_storage_id: w.storage.id, s3_key: expect.any(String) });
    const still = await track(w.api.delete(`/s3-storages/${w.storage.id}`));
    expect(still.status).toBe(409);
    expect(still.body.message).toMatch(/1 backup\(s\) have their object in it/);
  });

  it("deleting a schedule cancels its running backup; files stay", async () => {
    const w = await world();
    const s = await schedule(w);
    await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    const job = await w.agent.nextJob(10_000);
    expect((await track(w.api.delete(`${base(w)}/${s.uuid}`))).status).toBe(200);
    expect(await w.agent.nextCancel()).toBe(job.id);
    expect(await t.instance.database.prisma.backupExecution.count({ where: { jobId: job.id } })).toBe(0);
    expect(w.agent.jobs.some((j) => j.type === "backup.delete")).toBe(false);
  });
});

describe("database deletion", () => {
  it("cancels the database's running backup; its schedules and executions go with it", async () => {
    const w = await world();
    const s = await schedule(w);
    await track(w.api.post(`${base(w)}/${s.uuid}/execute`));
    const job = await w.agent.nextJob(10_000);
    expect(job.type).toBe("db.backup");
    const del = await track(w.api.delete(`/databases/${w.database.uuid}`));
    expect(del.status, JSON.stringify(del.body)).toBeLessThan(300);
    expect(await w.agent.nextCancel()).toBe(job.id);
    await until(async () => (await t.instance.database.prisma.backupSchedule.count({ where: { uuid: s.uuid } })) === 0);
    expect(await t.instance.database.prisma.backupExecution.count({ where: { jobId: job.id } })).toBe(0);
  });
});

describe("secrets", () => {
  it("no response carried a storage secret, a passphrase or database credentials", () => {
    expect(seen.length).toBeGreaterThan(100);
    const all = seen.join("\n");
    expect(all).not.toContain(s3.secretKey);
    expect(all).not.toContain(s3.accessKey);
    for (const w of worlds) {
      expect(all).not.toContain(w.storage.passphrase);
      expect(all).not.toContain(w.credentials.password);
    }
  });

  it("job payloads are sealed at rest", async () => {
    const rows = await t.instance.database.prisma.job.findMany({ where: { type: { in: ["db.backup", "db.restore", "backup.delete"] } } });
    expect(rows.length).toBeGreaterThan(5);
    for (const r of rows) {
      expect(r.payload.startsWith("v1:")).toBe(true);
      expect(r.payload).not.toContain(s3.secretKey);
    }
  });
});
