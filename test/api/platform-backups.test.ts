import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, connectServerAgent, createImageApp, ok, until, type AppWorld } from "./support/applications.js";
import { connectAgent, type ScriptedAgent } from "./support/fake-agent.js";
import { freshPostgresDatabase } from "./support/database.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";
import { buildControlPlane, runCapstan } from "../support/capstan-cli.js";

/**
 * platform_instance backups (issue 19) through the real API on this run's database (SQLite, or
 * PostgreSQL with CAPSTAN_TEST_PG_URL), restored by the real `capstan restore` into a new data
 * directory (and a new PostgreSQL database), then served by a new control plane.
 */
const PG = process.env.CAPSTAN_TEST_PG_URL;

let t: TestInstance;
let s3: S3Server;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];
const dirs: string[] = [];
const dbs: { drop(): Promise<void> }[] = [];

/** A new target: an empty data directory path (not created) and, on PostgreSQL, a new empty database. */
async function target(): Promise<{ dir: string; env: Record<string, string>; url: string | null }> {
  const parent = mkdtempSync(join(tmpdir(), "capstan-restore-"));
  dirs.push(parent);
  const db = PG ? await freshPostgresDatabase(PG) : null;
  if (db) dbs.push(db);
  return { dir: join(parent, "data"), env: db ? { DATABASE_URL: db.url } : {}, url: db?.url ?? null };
}

async function pgTableCount(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = current_schema()")).rows[0].n;
  } finally {
    await c.end();
  }
}

/** A list body: the array, or the `data` of a paged one. */
const items = (body: any): any[] => (Array.isArray(body) ? body : body.data);

let w: AppWorld;
let agent: ScriptedAgent;
let app: { uuid: string; name: string };
let root: ReturnType<TestInstance["api"]>;
const secret = `s3cr3t-${randomBytes(6).toString("hex")}`;
const passphrase = `platform-pass-${randomBytes(6).toString("hex")}`;
let schedule: { id: number; [k: string]: unknown };
let execution: any;
let archiveFile: string;

beforeAll(async () => {
  s3 = await startS3Server({ buckets: ["capstan-platform"] });
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
  // The CLI runs from control-plane/dist, as operators run it.
  await buildControlPlane();
  w = await appWorld(t, keys);
  agent = await connectServerAgent(t, w);
  agents.push(agent);
  app = await createImageApp(w);
  await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "API_SECRET", value: secret }), "env");
  root = t.api(t.rootToken);
}, 240_000);

afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  await s3?.stop();
  for (const db of dbs) await db.drop().catch(() => undefined);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  keys.cleanup();
});

describe(`platform_instance backups and capstan restore (${PG ? "PostgreSQL" : "SQLite"})`, () => {
  it("is for the root team's owners and admins only: 403 for its members and for other teams' owners", async () => {
    const body = { resource_type: "platform_instance", backup_type: "platform_instance", frequency: "0 4 * * *" };
    const member = await t.newMember(t.rootTeamId, "member");
    expect((await t.api(member.token).post("/resource-backups", body)).status).toBe(403);
    expect((await w.api.post("/resource-backups", body)).status).toBe(403);
    expect((await root.post("/resource-backups", { ...body, resource_id: 1 })).status).toBe(422);
    expect((await root.post("/resource-backups", { ...body, backup_type: "volume" })).status).toBe(422);
  });

  it("writes one encrypted archive of the whole instance to S3 and the data directory, with its size", async () => {
    const storage = await ok(
      root.post("/s3-storages", { name: "platform", endpoint: s3.endpoint, bucket: s3.bucket, path_prefix: "capstan/", access_key: s3.accessKey, secret_key: s3.secretKey, encryption_passphrase: passphrase }),
      "s3 storage",
    );
    const created = await root.post("/resource-backups", { resource_type: "platform_instance", backup_type: "platform_instance", frequency: "0 4 * * *", s3_storage_id: storage.data.id, keep_locally: true, number_of_backups_locally: 2 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    schedule = created.body.data;
    expect(schedule).toMatchObject({ resource_type: "App\\Models\\InstanceSettings", resource_id: null, backup_type: "platform_instance" });
    // members of the root team see no platform backup; its admins list it
    const member = await t.newMember(t.rootTeamId, "member");
    const asMember = t.api(member.token);
    expect((await asMember.get(`/resource-backups/${schedule.id}`)).status).toBe(403);
    expect((await asMember.put(`/resource-backups/${schedule.id}`, { enabled: false })).status).toBe(403);
    expect((await asMember.post(`/resource-backups/${schedule.id}/execute`)).status).toBe(403);
    expect((await asMember.delete(`/resource-backups/${schedule.id}`)).status).toBe(403);
    expect(items((await asMember.get("/resource-backups")).body).map((b: { id: number }) => b.id)).not.toContain(schedule.id);
    const refused = await root.put(`/resource-backups/${schedule.id}`, { stop_during_backup: true });
    expect(refused.status).toBe(422);
    expect(Object.keys(refused.body.errors)).toContain("stop_during_backup");
    expect(items((await root.get("/resource-backups")).body).map((b: { id: number }) => b.id)).toContain(schedule.id);

    const run = await root.post(`/resource-backups/${schedule.id}/execute`);
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    await until(async () => {
      execution = (await root.get(`/resource-backups/${schedule.id}`)).body.executions.find((e: { id: number }) => e.id === run.body.execution_id);
      return execution && execution.status !== "running" && execution.status !== "queued";
    }, 60_000);
    expect(execution, JSON.stringify(execution)).toMatchObject({ status: "success", is_encrypted: true, stored_locally: true, reason: null });
    expect(execution.filename).toMatch(/^platform-\d{8}T\d{6}Z-[0-9a-f]{8}\.ndjson\.gz\.gpg$/);
    const object = (await s3.objects("capstan/platform-instance/")).find((o) => o.key === execution.s3_key);
    expect(object?.size).toBe(execution.size);
    const dir = join(t.config.dataDir, "backups", "platform");
    const [scheduleDir] = readdirSync(dir);
    archiveFile = join(dir, scheduleDir!, execution.filename);
    expect(readFileSync(archiveFile).length).toBe(execution.size);
    // the plaintext is nowhere in the archive (secrets sealed, then the whole file encrypted)
    expect(readFileSync(archiveFile).includes(Buffer.from("API_SECRET"))).toBe(false);
  });

  it("refuses a tampered and a truncated archive, and a non-empty data directory, writing nothing", async () => {
    const bytes = readFileSync(archiveFile);
    const tampered = Buffer.from(bytes);
    const middle = Math.floor(tampered.length / 2);
    tampered.writeUInt8(tampered.readUInt8(middle) ^ 0x01, middle);
    const cases: [string, Buffer, RegExp][] = [
      ["tampered", tampered, /restore refused: .*(authenticat|decrypt|tag|modif)/i],
      ["truncated", bytes.subarray(0, Math.floor(bytes.length * 0.6)), /restore refused: .*(truncated|end|decrypt)/i],
    ];
    for (const [name, data, reason] of cases) {
      const to = await target();
      const file = join(dirname(to.dir), `${name}.gpg`);
      writeFileSync(file, data);
      const r = await runCapstan(["restore", "--from", file, "--data-dir", to.dir], { ...to.env, CAPSTAN_RESTORE_PASSPHRASE: passphrase });
      expect(r.code, `${name}: ${r.stderr}`).toBe(1);
      expect(r.stderr, name).toMatch(reason);
      expect(existsSync(to.dir), name).toBe(false);
      if (to.url) expect(await pgTableCount(to.url), name).toBe(0);
    }
    const to = await target();
    mkdirSync(to.dir);
    writeFileSync(join(to.dir, "something"), "x");
    const r = await runCapstan(["restore", "--from", archiveFile, "--data-dir", to.dir], { ...to.env, CAPSTAN_RESTORE_PASSPHRASE: passphrase });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/not empty/);
    const wrong = await target();
    const bad = await runCapstan(["restore", "--from", archiveFile, "--data-dir", wrong.dir, "--passphrase-stdin"], wrong.env, "not-the-passphrase\n");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/restore refused: wrong passphrase/);
    expect(existsSync(wrong.dir)).toBe(false);
  });

  it("restores from S3 into a new instance: same teams, tokens, resources, schedules and secrets; the agent reconnects with its token", async () => {
    const to = await target();
    const r = await runCapstan(["restore", "--from", `s3://${s3.bucket}/${execution.s3_key}`, "--data-dir", to.dir, "--passphrase-stdin"], {
      ...to.env,
      PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true",
      CAPSTAN_RESTORE_S3_ENDPOINT: s3.endpoint,
      CAPSTAN_RESTORE_S3_ACCESS_KEY: s3.accessKey,
      CAPSTAN_RESTORE_S3_SECRET_KEY: s3.secretKey,
    }, `${passphrase}\n`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/restored \d+ rows of \d+ tables/);

    const before = {
      apps: items((await w.api.get("/applications")).body),
      servers: items((await w.api.get("/servers")).body).map((s: { uuid: string; name: string }) => [s.uuid, s.name]),
      backups: items((await root.get("/resource-backups")).body).map((b: { id: number }) => b.id),
    };
    for (const a of agents) a.close();
    const t2 = await startTestInstance({ PLATFORM_DATA_DIR: to.dir, ...to.env });
    try {
      // the same tokens work, and see the same resources
      const api2 = t2.api(w.team.token);
      expect(items((await api2.get("/applications")).body)).toEqual(before.apps);
      expect(items((await api2.get("/servers")).body).map((s: { uuid: string; name: string }) => [s.uuid, s.name])).toEqual(before.servers);
      expect(items((await t2.api(t.rootToken).get("/resource-backups")).body).map((b: { id: number }) => b.id)).toEqual(before.backups);
      // the run that wrote the archive was open in its snapshot: restored, it is the success it was
      const runs = (await t2.api(t.rootToken).get(`/resource-backups/${schedule.id}`)).body.executions;
      expect(runs.find((e: { id: number }) => e.id === execution.id)).toMatchObject({ status: "success", size: execution.size, s3_key: execution.s3_key, stored_locally: false, reason: null });
      // sealed secrets open with the restored key
      const envs = items((await api2.get(`/applications/${app.uuid}/envs`)).body) as { key: string; value: string }[];
      expect(envs.find((e) => e.key === "API_SECRET")?.value).toBe(secret);
      // new rows continue after the restored ids
      const more = await ok(api2.post("/projects", { name: "after restore" }), "project after restore");
      expect(more.uuid).toBeTruthy();
      // the server's agent connects to the restored instance with its existing token
      const row = () => t2.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: w.server.uuid } });
      const restoredConnection = (await row()).agentConnection;
      const again = await connectAgent(t2.url, w.server.agentToken);
      agents.push(again);
      await again.hello();
      // the new control plane greeted this very socket for the server (not a connection of the snapshot)
      await until(async () => {
        const s = await row();
        return s.agentConnection !== null && s.agentConnection !== restoredConnection;
      }, 20_000);
      await until(async () => (await api2.get(`/servers/${w.server.uuid}`)).body.status === "reachable", 20_000);
      // and a wrong token is still refused there
      await expect(connectAgent(t2.url, "cap_agent_" + "0".repeat(40)).then((a) => (agents.push(a), a.hello()))).rejects.toThrow();
    } finally {
      await t2.close();
    }
  });

  // After the restore test: its schedule would be one the archive (made earlier) does not hold.
  it("keep_locally with S3: an upload that fails fails the run and leaves no local file either", async () => {
    const gone = await startS3Server({ buckets: ["capstan-gone"] });
    const storage = await ok(
      root.post("/s3-storages", { name: "going", endpoint: gone.endpoint, bucket: gone.bucket, access_key: gone.accessKey, secret_key: gone.secretKey }),
      "s3 storage",
    );
    await gone.stop();
    const created = await ok(
      root.post("/resource-backups", { resource_type: "platform_instance", backup_type: "platform_instance", frequency: "0 4 * * *", s3_storage_id: storage.data.id, keep_locally: true }),
      "schedule",
    );
    const run = await root.post(`/resource-backups/${created.data.id}/execute`);
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    let e: any;
    await until(async () => {
      e = (await root.get(`/resource-backups/${created.data.id}`)).body.executions.find((x: { id: number }) => x.id === run.body.execution_id);
      return e && e.status !== "running";
    }, 60_000);
    expect(e, JSON.stringify(e)).toMatchObject({ status: "failed", stored_locally: false, s3_key: null });
    expect(e.reason).toBeTruthy();
    const { uuid } = await t.instance.database.prisma.backupSchedule.findUniqueOrThrow({ where: { id: created.data.id } });
    const dir = join(t.config.dataDir, "backups", "platform", uuid);
    expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
  });
});

/** Runs a platform backup on `inst` (the root team's token) and waits for its end; returns the execution. */
async function backupNow(inst: TestInstance, body: Record<string, unknown>, token = inst.rootToken): Promise<{ id: number; execution: any }> {
  const api = inst.api(token);
  const created = await api.post("/resource-backups", { resource_type: "platform_instance", backup_type: "platform_instance", frequency: "0 4 * * *", ...body });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const run = await api.post(`/resource-backups/${created.body.data.id}/execute`);
  expect(run.status, JSON.stringify(run.body)).toBe(200);
  let e: any;
  await until(async () => {
    e = (await api.get(`/resource-backups/${created.body.data.id}`)).body.executions.find((x: { id: number }) => x.id === run.body.execution_id);
    return e && e.status !== "running";
  }, 60_000);
  expect(e, JSON.stringify(e)).toMatchObject({ status: "success" });
  return { id: created.body.data.id, execution: e };
}

describe("platform_instance: one tick per minute across calls", () => {
  it("a cron tick claims one run, however many times it is claimed", async () => {
    const { id } = await backupNow(t, { keep_locally: true, number_of_backups_locally: 1 });
    const minute = new Date(Date.UTC(2026, 10, 27, 4, 0, 0));
    const results = await Promise.all([0, 1, 2].map(() => t.instance.services.backups.claimTick(id, minute)));
    expect(results.filter((r) => r === "started")).toHaveLength(1);
    expect(results.filter((r) => r === "lost")).toHaveLength(2);
    const rows = await t.instance.database.prisma.backupExecution.findMany({ where: { scheduleId: id }, orderBy: { id: "asc" } });
    await until(async () => (await t.instance.database.prisma.backupExecution.count({ where: { scheduleId: id, status: "running" } })) === 0, 60_000);
    expect(rows.filter((r) => r.scheduledFor?.getTime() === minute.getTime())).toHaveLength(1);
    // retention: number_of_backups_locally 1 keeps the newest file only
    const done = await t.instance.database.prisma.backupExecution.findMany({ where: { scheduleId: id, status: "success" }, orderBy: { id: "asc" } });
    expect(done.map((r) => r.localPath !== null)).toEqual([false, true]);
  });
});

// Both directions between the databases: run with CAPSTAN_TEST_PG_URL (a PostgreSQL server is needed either way).
describe.runIf(PG)("platform_instance across databases", () => {
  it("restores a PostgreSQL instance's archive into SQLite, and a SQLite instance's into PostgreSQL", async () => {
    // PostgreSQL -> SQLite: the archive written above
    const intoSqlite = await target();
    const r1 = await runCapstan(["restore", "--from", archiveFile, "--data-dir", intoSqlite.dir], { CAPSTAN_RESTORE_PASSPHRASE: passphrase });
    expect(r1.code, r1.stderr).toBe(0);
    const onSqlite = await startTestInstance({ PLATFORM_DATA_DIR: intoSqlite.dir, DATABASE_URL: `file:${join(intoSqlite.dir, "capstan.db")}` });
    try {
      const envs = items((await onSqlite.api(w.team.token).get(`/applications/${app.uuid}/envs`)).body) as { key: string; value: string }[];
      expect(envs.find((e) => e.key === "API_SECRET")?.value).toBe(secret);
      // SQLite -> PostgreSQL: a backup of the restored SQLite instance (unencrypted, local only)
      const { execution: e } = await backupNow(onSqlite, { keep_locally: true }, t.rootToken);
      expect(e.is_encrypted).toBe(false);
      const [dir] = readdirSync(join(intoSqlite.dir, "backups", "platform"));
      const file = join(intoSqlite.dir, "backups", "platform", dir!, e.filename);
      const intoPg = await target();
      const r2 = await runCapstan(["restore", "--from", file, "--data-dir", intoPg.dir], intoPg.env);
      expect(r2.code, r2.stderr).toBe(0);
      const onPg = await startTestInstance({ PLATFORM_DATA_DIR: intoPg.dir, ...intoPg.env });
      try {
        const again = items((await onPg.api(w.team.token).get(`/applications/${app.uuid}/envs`)).body) as { key: string; value: string }[];
        expect(again.find((x) => x.key === "API_SECRET")?.value).toBe(secret);
        expect((await ok(onPg.api(w.team.token).post("/projects", { name: "on pg" }), "project")).uuid).toBeTruthy();
      } finally {
        await onPg.close();
      }
    } finally {
      await onSqlite.close();
    }
  });
});
