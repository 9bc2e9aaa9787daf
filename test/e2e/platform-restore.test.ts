/**
 * Issue 19, the platform restore proven end to end: a control plane (SQLite, or PostgreSQL with
 * CAPSTAN_TEST_PG_URL) with a real agent on this machine's engine deploys an application whose
 * variable is a secret, then writes an encrypted platform_instance backup to a real S3 server.
 * The control plane is stopped; `capstan restore` brings the archive from S3 into a new, empty
 * data directory (and a new PostgreSQL database); a new control plane is started on it at the
 * same address, as an operator does (docs/resource-backups.md). The SAME agent process, with the
 * token it was started with, reconnects to it by itself: the server is reachable through that new
 * connection, a deployment runs on it and serves the decrypted secret, the S3 storage's keys
 * (masked in answers) still sign requests, and what happened after the archive was written is
 * not there.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApiClient, TeamFixture } from "../api/harness.js";
import { freshPostgresDatabase } from "../api/support/database.js";
import { buildControlPlane, runCapstan } from "../support/capstan-cli.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";
import { until } from "./support/kit.js";
import { viaProxyAt } from "./support/http.js";
import { applicationCreator, buildHelloImage, deployFinished, startLocalStack, type LocalStack } from "./support/local-server.js";

const RUN = randomBytes(3).toString("hex");
const PG = process.env.CAPSTAN_TEST_PG_URL;
const HELLO_IMAGE = "capstan-test/e2e-hello:latest";
const DEPLOY_TIMEOUT_S = 180;
const HOST = `platform-${RUN}.e2e.test`;
const SECRET = `greeting-${randomBytes(6).toString("hex")}`;
const PASSPHRASE = `platform-pass-${randomBytes(6).toString("hex")}`;

let stack: LocalStack;
let team: TeamFixture;
let root: ApiClient;
let s3: S3Server;
let project: string;
let server: { uuid: string; destination: string };
const { common, create } = applicationCreator(() => team.api, () => ({ project, server }));
/** The restore's target: a data directory (not created) inside `parent`, and on PostgreSQL a new database. */
const parent = mkdtempSync(join(tmpdir(), `capstan-e2e-platform-${RUN}-`));
const dataDir = join(parent, "data");
let database: { url: string; drop(): Promise<void> } | null = null;

/** A list body: the array, or the `data` of a paged one. */
const items = (body: any): any[] => (Array.isArray(body) ? body : body.data);
const served = (expected: string) =>
  until(`the application to serve "${expected}"`, async () => {
    const r = await viaProxyAt("127.0.0.1", stack.proxyPort, HOST);
    return r.status === 200 && r.body.trim() === expected ? r.body.trim() : null;
  }, 30_000);

/** Runs a platform_instance backup of `schedule` on the current control plane and waits for its end. */
async function runPlatformBackup(schedule: number): Promise<any> {
  const run = await root.post(`/resource-backups/${schedule}/execute`);
  expect(run.status, JSON.stringify(run.body)).toBe(200);
  let execution: any;
  await until("the platform backup to end", async () => {
    execution = (await root.get(`/resource-backups/${schedule}`)).body.executions.find((e: { id: number }) => e.id === run.body.execution_id);
    return execution && execution.status !== "queued" && execution.status !== "running";
  }, 60_000);
  expect(execution, JSON.stringify(execution)).toMatchObject({ status: "success", is_encrypted: true, reason: null });
  return execution;
}

beforeAll(async () => {
  // `capstan restore` runs from control-plane/dist, as operators run it.
  await buildControlPlane();
  await buildHelloImage(HELLO_IMAGE);
  s3 = await startS3Server({ buckets: ["capstan-platform-e2e"] });
  stack = await startLocalStack({ name: `platform-${RUN}`, deployTimeoutS: DEPLOY_TIMEOUT_S });
  ({ team, server, project } = stack);
  root = stack.t.api(stack.t.rootToken);
}, 300_000);

afterAll(async () => {
  await stack?.close();
  await s3?.stop();
  await database?.drop().catch(() => undefined);
  rmSync(parent, { recursive: true, force: true });
}, 120_000);

describe(`platform_instance backup -> capstan restore into a new data directory -> the same agent reconnects (${PG ? "PostgreSQL" : "SQLite"})`, () => {
  let app: string;
  let storage: number;
  let schedule: number;
  let execution: any;
  let before: Record<string, unknown>;

  it("before: an application deployed with a secret variable, and an encrypted platform backup of the instance in S3", async () => {
    app = await create("dockerimage", common("hello", { docker_registry_image_name: HELLO_IMAGE, ports_exposes: "8080", fqdn: `http://${HOST}` }));
    expect((await team.api.post(`/applications/${app}/envs`, { key: "GREETING", value: SECRET })).status).toBe(201);
    await deployFinished(team.api, app, DEPLOY_TIMEOUT_S * 1000);
    await served(`hello ${SECRET}`);

    const created = await root.post("/s3-storages", {
      name: "platform", endpoint: s3.endpoint, bucket: s3.bucket, path_prefix: "capstan/", access_key: s3.accessKey, secret_key: s3.secretKey, encryption_passphrase: PASSPHRASE,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    storage = created.body.data.id;
    const sched = await root.post("/resource-backups", { resource_type: "platform_instance", backup_type: "platform_instance", frequency: "0 4 * * *", s3_storage_id: storage, keep_locally: false });
    expect(sched.status, JSON.stringify(sched.body)).toBe(201);
    schedule = sched.body.data.id;
    execution = await runPlatformBackup(schedule);
    expect(execution.s3_key).toMatch(/^capstan\/platform-instance\/platform-.*\.ndjson\.gz\.gpg$/);

    before = {
      projects: items((await team.api.get("/projects")).body).map((p: { uuid: string; name: string }) => [p.uuid, p.name]),
      applications: items((await team.api.get("/applications")).body).map((a: { uuid: string; name: string; fqdn: string }) => [a.uuid, a.name, a.fqdn]),
      servers: items((await team.api.get("/servers")).body).map((s: { uuid: string; name: string; ip: string }) => [s.uuid, s.name, s.ip]),
      storages: items((await root.get("/s3-storages")).body),
      schedules: items((await root.get("/resource-backups")).body).map((b: { id: number }) => b.id),
    };

    // After the archive: a project and a changed variable, deployed by the agent. Neither is in
    // the archive, and the agent ran jobs the restored control plane never wrote.
    expect((await team.api.post("/projects", { name: "after the backup" })).status).toBe(201);
    expect((await team.api.patch(`/applications/${app}/envs`, { key: "GREETING", value: "after-the-backup" })).status).toBe(200);
    await deployFinished(team.api, app, DEPLOY_TIMEOUT_S * 1000);
    await served("hello after-the-backup");
  }, DEPLOY_TIMEOUT_S * 3000);

  it("the control plane stops; `capstan restore` from S3 into a new data directory; a new control plane at the same address; the agent reconnects with its token", async () => {
    database = PG ? await freshPostgresDatabase(PG) : null;
    const target: Record<string, string> = database ? { DATABASE_URL: database.url } : {};
    const snapshotConnection = { value: undefined as string | null | undefined };
    // What an operator does: stop the old control plane, restore, start the new one where the
    // agents' CAPSTAN_URL points (the same address and port).
    await stack.t.restart(0, { PLATFORM_DATA_DIR: dataDir, ...target }, async () => {
      const r = await runCapstan(["restore", "--from", `s3://${s3.bucket}/${execution.s3_key}`, "--data-dir", dataDir, "--passphrase-stdin"], {
        ...target,
        PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true",
        CAPSTAN_RESTORE_S3_ENDPOINT: s3.endpoint,
        CAPSTAN_RESTORE_S3_ACCESS_KEY: s3.accessKey,
        CAPSTAN_RESTORE_S3_SECRET_KEY: s3.secretKey,
      }, `${PASSPHRASE}\n`);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout + r.stderr).toMatch(/restored \d+ rows of \d+ tables/);
      expect(r.stdout + r.stderr).not.toContain(PASSPHRASE);
    });
    expect(stack.t.config.dataDir).toBe(dataDir);
    const row = () => stack.t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: server.uuid } });
    snapshotConnection.value = (await row()).agentConnection;

    // The same agent process reconnects by itself: a connection the new control plane greeted.
    await until("the agent to reconnect to the restored control plane", async () => {
      const s = await row();
      return s.agentConnection !== null && s.agentConnection !== snapshotConnection.value;
    }, 60_000);
    await until("the server to be reachable", async () => (await team.api.get(`/servers/${server.uuid}`)).body.status === "reachable", 30_000);
    const detail = (await team.api.get(`/servers/${server.uuid}`)).body;
    expect(detail.agent.connected).toBe(true);
    const validated = await team.api.get(`/servers/${server.uuid}/validate`);
    expect(validated.status, JSON.stringify(validated.body)).toBe(200);
    expect(validated.body.message).toBe("Server is reachable and usable.");
  }, 240_000);

  it("the restored control plane lists the same resources (and nothing written after the archive), with the same tokens", async () => {
    expect(items((await team.api.get("/projects")).body).map((p: { uuid: string; name: string }) => [p.uuid, p.name])).toEqual(before.projects);
    expect(items((await team.api.get("/applications")).body).map((a: { uuid: string; name: string; fqdn: string }) => [a.uuid, a.name, a.fqdn])).toEqual(before.applications);
    expect(items((await team.api.get("/servers")).body).map((s: { uuid: string; name: string; ip: string }) => [s.uuid, s.name, s.ip])).toEqual(before.servers);
    expect(items((await root.get("/resource-backups")).body).map((b: { id: number }) => b.id)).toEqual(before.schedules);
    // The run that wrote the archive was running in its snapshot: restored, it is the success it
    // was (its S3 object, its size), not a run that never ended (its storage counts it again).
    const runs = (await root.get(`/resource-backups/${schedule}`)).body.executions;
    expect(runs.find((e: { id: number }) => e.id === execution.id)).toMatchObject({ status: "success", size: execution.size, s3_key: execution.s3_key, is_encrypted: true, stored_locally: false, reason: null });
    const storages = items((await root.get("/s3-storages")).body);
    expect(storages.map(({ is_usable: _u, last_tested_at: _l, ...s }: Record<string, unknown>) => s)).toEqual(
      (before.storages as Record<string, unknown>[]).map(({ is_usable: _u, last_tested_at: _l, ...s }) => s),
    );
  });

  it("secrets decrypt: the variable is the archived one, the S3 keys stay masked and still sign, a deployment on the agent serves the secret", async () => {
    const envs = items((await team.api.get(`/applications/${app}/envs`)).body) as { key: string; value: string }[];
    expect(envs.find((e) => e.key === "GREETING")?.value).toBe(SECRET);

    const shown = JSON.stringify((await root.get(`/s3-storages/${storage}`)).body);
    expect(shown).not.toContain(s3.secretKey);
    expect(shown).not.toContain(s3.accessKey);
    expect(shown).not.toContain(PASSPHRASE);
    const tested = await root.post(`/s3-storages/${storage}/test`);
    expect(tested.body, JSON.stringify(tested.body)).toMatchObject({ usable: true });

    // A job on the reconnected agent: the restored control plane opens the sealed variable and
    // deploys it; the proxy serves the archived greeting again.
    const d = await deployFinished(team.api, app, DEPLOY_TIMEOUT_S * 1000);
    expect(String(d.logs)).not.toContain(SECRET);
    await served(`hello ${SECRET}`);

    // The restored instance backs itself up to the same storage: its S3 keys and passphrase open.
    const again = await runPlatformBackup(schedule);
    expect(again.s3_key).not.toBe(execution.s3_key);
    expect((await s3.objects("capstan/platform-instance/")).map((o) => o.key)).toEqual(expect.arrayContaining([execution.s3_key, again.s3_key]));
  }, DEPLOY_TIMEOUT_S * 2000);
});
