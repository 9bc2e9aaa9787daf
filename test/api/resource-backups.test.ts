import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JOBS } from "@capstan/shared";
import { startTestInstance, type ApiResponse, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { createImageApp, ok, until } from "./support/applications.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";
import { resourceBackupResult, storageWorld, type StorageWorld } from "./support/backups.js";

/**
 * Resource backups (spec 4.10, issue 19) through the real API on a real database: schedules of
 * an application's volumes, runs handed to the server's (scripted) agent as resource.backup jobs
 * and their results; the real agent's archive runs in test/e2e/resource-backups.test.ts.
 */
let t: TestInstance;
let s3: S3Server;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];
const seen: string[] = [];
const track = async <T = any>(p: Promise<ApiResponse<T>>): Promise<ApiResponse<T>> => {
  const r = await p;
  seen.push(JSON.stringify(r.body ?? null));
  return r;
};

beforeAll(async () => {
  s3 = await startS3Server({ buckets: ["capstan-backups"] });
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
});
afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  await s3?.stop();
  keys.cleanup();
});

interface World extends StorageWorld {
  app: { uuid: string; id: number };
}

async function world(opts: { agent?: boolean; storages?: boolean } = {}): Promise<World> {
  const w = await storageWorld(t, keys, s3, { agent: opts.agent, agents });
  const app = await createImageApp(w);
  if (opts.storages !== false) {
    await ok(w.api.post(`/applications/${app.uuid}/storages`, { name: "site", mount_path: "/usr/share/nginx/html" }), "storage");
    await ok(w.api.post(`/applications/${app.uuid}/storages`, { name: "uploads", mount_path: "/srv/uploads" }), "storage 2");
  }
  const id = (await ok(w.api.get(`/applications/${app.uuid}`), "app detail")).id as number;
  return { ...w, app: { uuid: app.uuid, id } };
}

async function create(w: World, body: Record<string, unknown> = {}) {
  const r = await track(w.api.post("/resource-backups", { resource_type: "application", resource_id: w.app.id, backup_type: "volume", frequency: "0 3 * * *", s3_storage_id: w.storage.id, ...body }));
  if (r.status !== 201) throw new Error(`create: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.data as { id: number; [k: string]: unknown };
}

const detail = async (w: World, id: number) => (await ok(track(w.api.get(`/resource-backups/${id}`)), "detail")) as { executions: any[]; [k: string]: unknown };

const result = resourceBackupResult;

describe("resource backups: the schedule", () => {
  it("create, list (filters), detail with executions, PUT, DELETE; resource_type is class-style", async () => {
    const w = await world({ agent: false });
    const created = await track(w.api.post("/resource-backups", { resource_type: "application", resource_id: w.app.id, backup_type: "volume", frequency: "0 3 * * *" }));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const s = created.body.data;
    expect(s).toMatchObject({
      id: expect.any(Number),
      resource_type: "App\\Models\\Application",
      resource_id: w.app.id,
      backup_type: "volume",
      frequency: "0 3 * * *",
      s3_storage_id: null,
      enabled: true,
      keep_locally: true,
      number_of_backups_locally: 7,
    });
    expect(new Date(s.next_run_at).getUTCHours()).toBe(3);
    expect(await detail(w, s.id)).toEqual({ ...s, executions: [] });

    expect((await track(w.api.get("/resource-backups"))).body.data).toEqual([s]);
    expect((await track(w.api.get(`/resource-backups?resource_type=application&resource_id=${w.app.id}`))).body.data).toEqual([s]);
    expect((await track(w.api.get(`/resource-backups?resource_type=${encodeURIComponent("App\\Models\\Application")}`))).body.data).toEqual([s]);
    expect((await track(w.api.get(`/resource-backups?resource_id=${w.app.id + 100000}`))).body.data).toEqual([]);
    expect((await track(w.api.get("/resource-backups?resource_type=database"))).body.data).toEqual([]);
    expect((await track(w.api.get("/resource-backups?resource_type=nonsense"))).status).toBe(422);
    expect((await track(w.api.get("/resource-backups?resource_id=x"))).status).toBe(422);

    const put = await track(w.api.put(`/resource-backups/${s.id}`, { frequency: "@hourly", s3_storage_id: w.storage.id, keep_locally: false, enabled: false }));
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body.data).toMatchObject({ frequency: "@hourly", s3_storage_id: w.storage.id, keep_locally: false, enabled: false, next_run_at: null });
    // Without a storage, keep_locally false has nowhere to keep the backup.
    const nowhere = await track(w.api.put(`/resource-backups/${s.id}`, { s3_storage_id: null }));
    expect(nowhere.status).toBe(422);
    expect(Object.keys(nowhere.body.errors)).toEqual(["keep_locally"]);
    expect((await detail(w, s.id)).s3_storage_id).toBe(w.storage.id);
    // The storage is in use.
    expect((await track(w.api.delete(`/s3-storages/${w.storage.id}`))).status).toBe(409);

    expect((await track(w.api.delete(`/resource-backups/${s.id}`))).status).toBe(200);
    expect((await track(w.api.get(`/resource-backups/${s.id}`))).status).toBe(404);
    expect((await track(w.api.get("/resource-backups"))).body.data).toEqual([]);
  });

  it("refuses what this version does not run, bad input, and references outside the team; nothing is created", async () => {
    const w = await world({ agent: false });
    const other = await world({ agent: false });
    const base = { resource_type: "application", resource_id: w.app.id, backup_type: "volume", frequency: "0 3 * * *" };
    const cases: [Record<string, unknown>, number, string?][] = [
      // configuration and full backups (w8/rbconfig): a configuration backup stops nothing; platform_instance goes with its own resource type
      [{ ...base, backup_type: "configuration", stop_during_backup: true }, 422, "stop_during_backup"],
      [{ ...base, resource_type: "service", backup_type: "platform_instance" }, 422, "backup_type"],
      // w8/rbsources: services are sources too; the application's id names no service of the team.
      [{ ...base, resource_type: "service", resource_id: 2_000_000_000 }, 404],
      // platform backups (w7/platform, test/api/platform-backups.test.ts): the root team's admins only
      [{ ...base, resource_type: "platform_instance", backup_type: "platform_instance", resource_id: undefined }, 403],
      [{ ...base, resource_type: "platform_instance" }, 422, "backup_type"],
      [{ ...base, resource_id: undefined }, 422, "resource_id"],
      [{ ...base, resource_id: 2_147_483_648 }, 422, "resource_id"],
      [{ ...base, resource_id: "1" }, 422, "resource_id"],
      [{ ...base, backup_type: "everything" }, 422, "backup_type"],
      [{ ...base, frequency: "61 * * * *" }, 422, "frequency"],
      [{ ...base, frequency: "* * * * * *" }, 422, "frequency"],
      [{ ...base, keep_locally: false }, 422, "keep_locally"],
      [{ ...base, number_of_backups_locally: 0 }, 422, "number_of_backups_locally"],
      [{ ...base, unknown_field: 1 }, 422],
      [{ ...base, resource_id: other.app.id }, 404],
      [{ ...base, s3_storage_id: other.storage.id }, 404],
    ];
    for (const [body, status, field] of cases) {
      const r = await track(w.api.post("/resource-backups", body));
      expect(r.status, JSON.stringify([body, r.body])).toBe(status);
      if (field) expect(Object.keys(r.body.errors ?? {}), JSON.stringify(r.body)).toContain(field);
    }
    expect(await t.instance.database.prisma.backupSchedule.count({ where: { applicationId: w.app.id } })).toBe(0);
    // PUT: nothing to change, or a bad value.
    const s = await create(w);
    expect((await track(w.api.put(`/resource-backups/${s.id}`, {}))).status).toBe(422);
    expect((await track(w.api.put(`/resource-backups/${s.id}`, { frequency: "nope" }))).status).toBe(422);
    expect((await track(w.api.put(`/resource-backups/${s.id}`, { resource_id: 5 }))).status).toBe(422);
  });

  it("another team sees none of it: every route is a 404", async () => {
    const w = await world({ agent: false });
    const other = await world({ agent: false });
    const s = await create(w);
    expect((await track(other.api.get("/resource-backups"))).body.data).toEqual([]);
    expect((await track(other.api.get(`/resource-backups?resource_id=${w.app.id}`))).body.data).toEqual([]);
    expect((await track(other.api.get(`/resource-backups/${s.id}`))).status).toBe(404);
    expect((await track(other.api.put(`/resource-backups/${s.id}`, { enabled: false }))).status).toBe(404);
    expect((await track(other.api.post(`/resource-backups/${s.id}/execute`))).status).toBe(404);
    expect((await track(other.api.delete(`/resource-backups/${s.id}`))).status).toBe(404);
    expect((await detail(w, s.id)).enabled).toBe(true);
  });
});

describe("resource backups: runs", () => {
  it("execute sends resource.backup with the volumes, the storage and its passphrase; the result lands on the execution (size in bytes)", async () => {
    const w = await world();
    const s = await create(w, { number_of_backups_locally: 3 });
    const queued = await track(w.api.post(`/resource-backups/${s.id}/execute`));
    expect(queued.status, JSON.stringify(queued.body)).toBe(200);
    expect(queued.body).toEqual({ message: "Backup queued.", execution_id: expect.any(Number) });
    const job = await w.agent!.nextJob(10_000);
    expect(job.type).toBe("resource.backup");
    const p = JOBS["resource.backup"].payload.parse(job.payload);
    expect(p.resource).toEqual({ kind: "application", uuid: w.app.uuid, name: expect.any(String) });
    expect(p.volumes).toEqual([
      { name: "site", mount_path: "/usr/share/nginx/html" },
      { name: "uploads", mount_path: "/srv/uploads" },
    ]);
    expect(p.filename).toMatch(/^volume-\d{8}T\d{6}Z-[0-9a-f]{8}\.tar\.gz\.gpg$/);
    expect(p.passphrase).toBe(w.storage.passphrase);
    expect(p.keep_locally).toBe(3);
    // w8/rbsources: each schedule's archives under its own prefix (remote retention counts them only).
    expect(p.s3?.prefix).toBe(`capstan/prod/${w.app.uuid}/${p.schedule_uuid}/`);
    expect(p.s3?.target.bucket).toBe(s3.bucket);
    // While it runs, a second run is refused.
    expect((await track(w.api.post(`/resource-backups/${s.id}/execute`))).status).toBe(409);
    await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: true, result: result(job) });
    await until(async () => (await detail(w, s.id)).executions[0]?.status === "success");
    const [e] = (await detail(w, s.id)).executions;
    expect(e).toMatchObject({ id: queued.body.execution_id, status: "success", trigger: "manual", filename: p.filename, size: 987_654, is_encrypted: true, s3_storage_id: w.storage.id, stored_locally: true, reason: null });
  });

  it("keep_locally false tells the agent to remove its copy once uploaded; a failed upload is a failed execution with the reason", async () => {
    const w = await world();
    const s = await create(w, { keep_locally: false });
    const queued = await track(w.api.post(`/resource-backups/${s.id}/execute`));
    const job = await w.agent!.nextJob(10_000);
    expect(JOBS["resource.backup"].payload.parse(job.payload).keep_locally).toBe(0);
    await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: false, error: "PUT https://s3/...: 503 SlowDown" });
    await until(async () => (await detail(w, s.id)).executions[0]?.status === "failed");
    expect((await detail(w, s.id)).executions[0]).toMatchObject({ id: queued.body.execution_id, status: "failed", reason: expect.stringMatching(/503 SlowDown/), size: null });
  });

  it("an application without storages, or a server whose agent is away: execute is refused with the reason", async () => {
    const bare = await world({ storages: false });
    const s = await create(bare);
    const r = await track(bare.api.post(`/resource-backups/${s.id}/execute`));
    expect(r.status).toBe(409);
    expect(r.body.message).toMatch(/no persistent storages/);
    const away = await world({ agent: false });
    const s2 = await create(away);
    const r2 = await track(away.api.post(`/resource-backups/${s2.id}/execute`));
    expect(r2.status).toBe(409);
    expect(r2.body.message).toMatch(/not reachable/);
  });

  it("cron ticks: one run per tick however many replicas fire it; a tick that cannot run is a failed execution", async () => {
    const w = await world();
    const s = await create(w, { frequency: "* * * * *" });
    const tick = new Date("2026-03-01T03:00:00Z");
    const fired = await Promise.all([t.instance.backupScheduler.fire(s.id, tick), t.instance.backupScheduler.fire(s.id, new Date(tick.getTime() + 20_000))]);
    expect(fired.sort()).toEqual(["lost", "started"]);
    const job = await w.agent!.nextJob(10_000);
    expect(job.type).toBe("resource.backup");
    await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: true, result: result(job) });
    await until(async () => (await detail(w, s.id)).executions[0]?.status === "success");
    expect((await detail(w, s.id)).executions.map((e) => e.trigger)).toEqual(["schedule"]);
    expect(t.instance.backupScheduler.watched()).toContain(s.id);

    const away = await world({ agent: false });
    const s2 = await create(away, { frequency: "* * * * *" });
    expect(await t.instance.backupScheduler.fire(s2.id, tick)).toBe("failed");
    expect((await detail(away, s2.id)).executions[0]).toMatchObject({ status: "failed", trigger: "schedule", reason: expect.stringMatching(/not reachable/) });
  });

  it("deleting a resource backup cancels its running backup; its executions go, the agent's files stay", async () => {
    const w = await world();
    const s = await create(w);
    await track(w.api.post(`/resource-backups/${s.id}/execute`));
    const job = await w.agent!.nextJob(10_000);
    expect((await track(w.api.delete(`/resource-backups/${s.id}`))).status).toBe(200);
    expect((await t.instance.database.prisma.job.findUniqueOrThrow({ where: { id: job.id } })).status).toBe("cancelled");
    expect(await t.instance.database.prisma.job.count({ where: { type: "backup.delete", server: { uuid: w.server.uuid } } })).toBe(0);
  });
});

// ---- stop_during_backup (w6/bkbench) ----
describe("resource backups: stop_during_backup (beyond the spec)", () => {
  it("is off by default, set on create and by PUT, refused when not a boolean, and sent to the agent in the job", async () => {
    const w = await world();
    const off = await create(w);
    expect(off.stop_during_backup).toBe(false);
    const s = await create(w, { stop_during_backup: true, frequency: "0 4 * * *" });
    expect(s.stop_during_backup).toBe(true);
    expect((await detail(w, s.id)).stop_during_backup).toBe(true);
    const bad = await track(w.api.post("/resource-backups", { resource_type: "application", resource_id: w.app.id, backup_type: "volume", frequency: "0 3 * * *", stop_during_backup: "yes" }));
    expect(bad.status).toBe(422);
    expect(Object.keys(bad.body.errors)).toContain("stop_during_backup");
    expect((await track(w.api.put(`/resource-backups/${s.id}`, { stop_during_backup: 1 }))).status).toBe(422);

    await track(w.api.post(`/resource-backups/${s.id}/execute`));
    const on = await w.agent!.nextJob(10_000);
    expect(JOBS["resource.backup"].payload.parse(on.payload).stop_during_backup).toBe(true);
    await w.agent!.outcome({ id: on.id, attempt: on.attempt, ok: true, result: result(on) });
    await until(async () => (await detail(w, s.id)).executions[0]?.status === "success");

    const put = await track(w.api.put(`/resource-backups/${s.id}`, { stop_during_backup: false }));
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body.data).toMatchObject({ stop_during_backup: false, frequency: "0 4 * * *" });
    await track(w.api.post(`/resource-backups/${s.id}/execute`));
    const live = await w.agent!.nextJob(10_000);
    expect(JOBS["resource.backup"].payload.parse(live.payload).stop_during_backup).toBe(false);
    await w.agent!.outcome({ id: live.id, attempt: live.attempt, ok: true, result: result(live) });
    await until(async () => (await detail(w, s.id)).executions[0]?.status === "success");
  });
});

// ---- resource restores (issue 19, w7/restore) ----
describe("resource restores: POST /resource-backups/{id}/executions/{execution_id}/restore", () => {
  /** A successful execution of a new resource backup of w's application (the agent's job answered). */
  async function succeeded(w: World, body: Record<string, unknown> = {}) {
    const s = await create(w, body);
    const queued = await track(w.api.post(`/resource-backups/${s.id}/execute`));
    const job = await w.agent!.nextJob(10_000);
    await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: true, result: result(job) });
    await until(async () => (await detail(w, s.id)).executions[0]?.status === "success");
    return { s, executionId: queued.body.execution_id as number, backupJob: job };
  }
  const restorePath = (id: number, executionId: number) => `/resource-backups/${id}/executions/${executionId}/restore`;

  it("202 with the restore status; resource.restore carries the volumes, the file's places and the storage's passphrase; the outcome lands on the execution", async () => {
    const w = await world();
    const { s, executionId, backupJob } = await succeeded(w);
    const r = await track(w.api.post(restorePath(s.id, executionId), {}));
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    expect(r.body).toEqual({ message: "Restore queued.", execution_id: executionId, restore_status: "queued" });
    const job = await w.agent!.nextJob(10_000);
    expect(job.type).toBe("resource.restore");
    const p = JOBS["resource.restore"].payload.parse(job.payload);
    const b = JOBS["resource.backup"].payload.parse(backupJob.payload);
    expect(p).toMatchObject({ resource: { kind: "application", uuid: w.app.uuid }, volumes: b.volumes, passphrase: w.storage.passphrase });
    expect(p.from.local_path).toBe(result(backupJob).local_path);
    expect(p.from.s3?.key).toBe(`${b.s3!.prefix}${b.filename}`);
    // While it runs: a second restore and a backup of the application are refused.
    const again = await track(w.api.post(restorePath(s.id, executionId), {}));
    expect(again.status).toBe(409);
    expect(again.body.message).toMatch(/already being restored/);
    const backup = await track(w.api.post(`/resource-backups/${s.id}/execute`));
    expect(backup.status).toBe(409);
    expect(backup.body.message).toMatch(/restore of this application is running/);
    expect((await detail(w, s.id)).executions[0]).toMatchObject({ id: executionId, restore_status: expect.stringMatching(/^(queued|running)$/), restore_reason: null });
    await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { files: 12, bytes: 3456, volumes: ["site", "uploads"] } });
    await until(async () => (await detail(w, s.id)).executions[0]?.restore_status === "success");

    // A failed restore shows the agent's reason.
    expect((await track(w.api.post(restorePath(s.id, executionId), {}))).status).toBe(202);
    const failing = await w.agent!.nextJob(10_000);
    await w.agent!.outcome({ id: failing.id, attempt: failing.attempt, ok: false, error: "volumes/site/index.html does not match its sha256 in the manifest" });
    await until(async () => (await detail(w, s.id)).executions[0]?.restore_status === "failed");
    expect((await detail(w, s.id)).executions[0]).toMatchObject({ restore_status: "failed", restore_reason: expect.stringMatching(/sha256/) });
  });

  it("409 while a deployment of the application runs, for an execution that did not succeed, and while the agent is away; 422 for bad input; 404 for another team's", async () => {
    const w = await world();
    const { s, executionId } = await succeeded(w);
    // An execution that failed has nothing to restore.
    await track(w.api.post(`/resource-backups/${s.id}/execute`));
    const job = await w.agent!.nextJob(10_000);
    await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: false, error: "upload failed" });
    await until(async () => (await detail(w, s.id)).executions[0]?.status === "failed");
    const failedId = (await detail(w, s.id)).executions[0].id as number;
    const notOk = await track(w.api.post(restorePath(s.id, failedId), {}));
    expect(notOk.status).toBe(409);
    expect(notOk.body.message).toMatch(/Only a successful backup can be restored/);

    // target_uuid (w8/rbsources): test/api/resource-backup-sources.test.ts; one that names nothing is a 404.
    expect((await track(w.api.post(restorePath(s.id, executionId), { target_uuid: "00000000-0000-4000-8000-000000000000" }))).status).toBe(404);
    for (const body of [{ passphrase: "" }, { passphrase: 5 }, { other: 1 }]) expect((await track(w.api.post(restorePath(s.id, executionId), body))).status, JSON.stringify(body)).toBe(422);
    expect((await track(w.api.post(restorePath(s.id, executionId + 100000), {}))).status).toBe(404);
    expect((await track(w.api.post(`/resource-backups/${s.id}/executions/x/restore`, {}))).status).toBe(422);

    // A deployment queued or running: the restore waits for it to end.
    const deploy = await track(w.api.post(`/applications/${w.app.uuid}/deploy`));
    expect(deploy.status, JSON.stringify(deploy.body)).toBeLessThan(300);
    const during = await track(w.api.post(restorePath(s.id, executionId), {}));
    expect(during.status).toBe(409);
    expect(during.body.message).toMatch(/deployment of this application is running/);
    await t.instance.database.prisma.deployment.updateMany({ where: { application: { uuid: w.app.uuid } }, data: { status: "failed" } });

    // Another team: 404 for its backup, its execution under our backup is not found either.
    const other = await world({ agent: false });
    expect((await track(other.api.post(restorePath(s.id, executionId), {}))).status).toBe(404);
    const otherBackup = await create(other);
    expect((await track(w.api.post(restorePath(otherBackup.id, executionId), {}))).status).toBe(404);

    // The agent away: refused with the reason; nothing was queued by any refusal above.
    await t.instance.database.prisma.server.updateMany({ where: { uuid: w.server.uuid }, data: { status: "unreachable" } });
    const away = await track(w.api.post(restorePath(s.id, executionId), {}));
    expect(away.status).toBe(409);
    expect(away.body.message).toMatch(/not reachable/);
    expect(await t.instance.database.prisma.job.count({ where: { type: "resource.restore", server: { uuid: w.server.uuid } } })).toBe(0);
  });
});

describe("deleting a resource backup cancels its open runs", () => {
  it("a running restore and a running backup of the deleted schedule end as cancelled; another schedule's run goes on", async () => {
    const job = (id: string) => t.instance.database.prisma.job.findUniqueOrThrow({ where: { id } });
    const w = await world();
    const restoring = await create(w);
    await track(w.api.post(`/resource-backups/${restoring.id}/execute`));
    const done = await w.agent!.nextJob(10_000);
    await w.agent!.outcome({ id: done.id, attempt: done.attempt, ok: true, result: result(done) });
    await until(async () => (await detail(w, restoring.id)).executions[0]?.status === "success");
    expect((await track(w.api.post(`/resource-backups/${restoring.id}/executions/${(await detail(w, restoring.id)).executions[0].id}/restore`, {}))).status).toBe(202);
    const restore = await w.agent!.nextJob(10_000);
    expect(restore.type).toBe("resource.restore");
    expect((await track(w.api.delete(`/resource-backups/${restoring.id}`))).status).toBeLessThan(300);
    expect(await job(restore.id)).toMatchObject({ status: "cancelled", error: "the resource backup was deleted" });

    const w2 = await world();
    const backingUp = await create(w2);
    const other = await create(w2, { frequency: "0 5 * * *" });
    await track(w2.api.post(`/resource-backups/${backingUp.id}/execute`));
    const running = await w2.agent!.nextJob(10_000);
    const w3 = await world();
    const bystander = await create(w3);
    await track(w3.api.post(`/resource-backups/${bystander.id}/execute`));
    const untouched = await w3.agent!.nextJob(10_000);
    expect((await track(w2.api.delete(`/resource-backups/${backingUp.id}`))).status).toBeLessThan(300);
    expect(await job(running.id)).toMatchObject({ status: "cancelled", error: "the resource backup was deleted" });
    expect((await job(untouched.id)).status).not.toBe("cancelled");
    expect((await track(w2.api.get(`/resource-backups/${other.id}`))).status).toBe(200);
  });
});

// ---- resource restores (issue 19, w7/restore): deleting the application ----
describe("deleting an application cancels its resource backup and restore jobs", () => {
  it("a running resource.backup and a running resource.restore are cancelled; the removal is queued", async () => {
    const w = await world();
    const a = await create(w);
    const b = await create(w, { frequency: "0 5 * * *" });
    // b: a successful backup, then its restore left running.
    await track(w.api.post(`/resource-backups/${b.id}/execute`));
    const done = await w.agent!.nextJob(10_000);
    await w.agent!.outcome({ id: done.id, attempt: done.attempt, ok: true, result: result(done) });
    await until(async () => (await detail(w, b.id)).executions[0]?.status === "success");
    expect((await track(w.api.post(`/resource-backups/${b.id}/executions/${(await detail(w, b.id)).executions[0].id}/restore`, {}))).status).toBe(202);
    const restore = await w.agent!.nextJob(10_000);
    expect(restore.type).toBe("resource.restore");
    // a: a backup queued behind it is refused while the restore runs; a backup of a other world's app is untouched.
    expect((await track(w.api.post(`/resource-backups/${a.id}/execute`))).status).toBe(409);
    const bystander = await world();
    const c = await create(bystander);
    await track(bystander.api.post(`/resource-backups/${c.id}/execute`));
    const other = await bystander.agent!.nextJob(10_000);

    expect((await track(w.api.delete(`/applications/${w.app.uuid}`))).status).toBeLessThan(300);
    const job = (id: string) => t.instance.database.prisma.job.findUniqueOrThrow({ where: { id } });
    expect(await job(restore.id)).toMatchObject({ status: "cancelled", error: "the application was deleted" });
    expect((await job(other.id)).status).not.toBe("cancelled");
    expect(await t.instance.database.prisma.job.count({ where: { type: "app.action", server: { uuid: w.server.uuid } } })).toBe(1);
    expect((await track(w.api.get(`/resource-backups/${b.id}`))).status).toBe(404);

    // A backup running when its application is deleted is cancelled too.
    const w2 = await world();
    const d = await create(w2);
    await track(w2.api.post(`/resource-backups/${d.id}/execute`));
    const running = await w2.agent!.nextJob(10_000);
    expect(running.type).toBe("resource.backup");
    expect((await track(w2.api.delete(`/applications/${w2.app.uuid}`))).status).toBeLessThan(300);
    expect(await job(running.id)).toMatchObject({ status: "cancelled", error: "the application was deleted" });
  });
});

describe("secrets", () => {
  it("no response carried a storage secret or passphrase", () => {
    const all = seen.join("\n");
    expect(all).not.toMatch(/backup-pass-[0-9a-f]{16}/);
    expect(all).not.toContain(s3.secretKey);
  });
});
