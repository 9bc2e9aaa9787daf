import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type ApiResponse, type TeamFixture, type TestInstance } from "./harness.js";
import { startReplica, type Replica } from "./support/replica.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";

/**
 * /s3-storages against a real S3-compatible server (s3rver behind a SigV4-checking front, on
 * loopback). Instance `t` allows private endpoints (the S3 server is on 127.0.0.1); `strict` is a
 * second replica on the same database that does not, as a default production instance.
 */
let t: TestInstance;
let strict: Replica;
let s3: S3Server;
let team: TeamFixture;
/** Every response body this file received, to check no secret ever appears in one. */
const seen: string[] = [];

const track = async <T = any>(p: Promise<ApiResponse<T>>): Promise<ApiResponse<T>> => {
  const r = await p;
  seen.push(JSON.stringify(r.body ?? null));
  return r;
};

const ACCESS_KEY = `AKIA${randomBytes(8).toString("hex").toUpperCase()}`;
const SECRET_KEY = `secret-${randomBytes(16).toString("hex")}`;
const PASSPHRASE = `pass-${randomBytes(12).toString("hex")}`;

function storageBody(extra: Record<string, unknown> = {}) {
  return {
    name: "backups",
    endpoint: s3.endpoint,
    bucket: s3.bucket,
    region: "us-east-1",
    path_prefix: "capstan/prod",
    access_key: s3.accessKey,
    secret_key: s3.secretKey,
    ...extra,
  };
}

beforeAll(async () => {
  s3 = await startS3Server({ buckets: ["capstan-backups", "other-bucket"] });
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
  strict = await startReplica(t, { allowPrivateEndpoints: false });
  team = await t.newTeam();
});
afterAll(async () => {
  await strict?.close();
  await t?.close();
  await s3?.stop();
});

describe("CRUD", () => {
  it("creates, reads, lists, changes and deletes a storage; keys and passphrase never come back", async () => {
    const created = await track(
      team.api.post("/s3-storages", storageBody({ access_key: ACCESS_KEY, secret_key: SECRET_KEY, encryption_passphrase: PASSPHRASE, description: "nightly" })),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const s = created.body.data;
    expect(s).toMatchObject({
      id: expect.any(Number),
      uuid: expect.any(String),
      name: "backups",
      description: "nightly",
      endpoint: s3.endpoint,
      region: "us-east-1",
      bucket: s3.bucket,
      path_prefix: "capstan/prod/",
      path_style: true,
      access_key: `****${ACCESS_KEY.slice(-4)}`,
      has_secret_key: true,
      is_encrypted: true,
      is_usable: false,
      last_tested_at: null,
      schedule_count: 0,
    });
    expect(s).not.toHaveProperty("secret_key");
    expect(s).not.toHaveProperty("encryption_passphrase");

    const got = await track(team.api.get(`/s3-storages/${s.id}`));
    expect(got.status).toBe(200);
    expect(got.body).toEqual(s);
    const list = await track(team.api.get("/s3-storages"));
    expect(list.body.data.map((x: { id: number }) => x.id)).toContain(s.id);
    const paged = await track(team.api.get("/s3-storages", { page: 1, per_page: 1 }));
    expect(paged.body.meta).toMatchObject({ current_page: 1, per_page: 1 });

    // Sealed at rest: the raw row holds no plaintext, and opens to the values given.
    const row = await t.instance.database.prisma.s3Storage.findUniqueOrThrow({ where: { id: s.id } });
    for (const [sealed, plain] of [
      [row.accessKey, ACCESS_KEY],
      [row.secretKey, SECRET_KEY],
      [row.encryptionPassphrase!, PASSPHRASE],
    ] as const) {
      expect(sealed.startsWith("v1:")).toBe(true);
      expect(sealed).not.toContain(plain);
      expect(t.instance.box.open(sealed)).toBe(plain);
    }

    // A rename keeps the test result; a connection field resets it.
    await t.instance.database.prisma.s3Storage.update({ where: { id: s.id }, data: { isUsable: true, lastTestedAt: new Date() } });
    const renamed = await track(team.api.patch(`/s3-storages/${s.id}`, { name: "renamed" }));
    expect(renamed.status).toBe(200);
    expect(renamed.body.data).toMatchObject({ name: "renamed", is_usable: true });
    const rekeyed = await track(team.api.patch(`/s3-storages/${s.id}`, { secret_key: `${SECRET_KEY}-2`, encryption_passphrase: null }));
    expect(rekeyed.body.data).toMatchObject({ is_usable: false, last_tested_at: null, is_encrypted: false, has_secret_key: true });
    const after = await t.instance.database.prisma.s3Storage.findUniqueOrThrow({ where: { id: s.id } });
    expect(t.instance.box.open(after.secretKey)).toBe(`${SECRET_KEY}-2`);
    expect(after.encryptionPassphrase).toBeNull();

    const del = await track(team.api.delete(`/s3-storages/${s.id}`));
    expect(del.status).toBe(200);
    expect((await track(team.api.get(`/s3-storages/${s.id}`))).status).toBe(404);
  });

  it("refuses bad input with 422 and field errors, creating nothing", async () => {
    const before = await t.instance.database.prisma.s3Storage.count();
    const cases: [Record<string, unknown>, string][] = [
      [{ endpoint: "ftp://s3.example.com" }, "endpoint"],
      [{ endpoint: "https://user:pw@s3.example.com" }, "endpoint"],
      [{ endpoint: "https://s3.example.com/some/path" }, "endpoint"],
      [{ endpoint: "https://s3.example.com/?x=1" }, "endpoint"],
      [{ endpoint: "not a url" }, "endpoint"],
      [{ bucket: "Upper_Case" }, "bucket"],
      [{ bucket: "ab" }, "bucket"],
      [{ bucket: "192.168.1.1" }, "bucket"],
      [{ bucket: "a..b" }, "bucket"],
      [{ bucket: "-leading" }, "bucket"],
      [{ path_prefix: "../escape" }, "path_prefix"],
      [{ path_prefix: "a b" }, "path_prefix"],
      [{ region: "us east" }, "region"],
      [{ encryption_passphrase: "short" }, "encryption_passphrase"],
      [{ access_key: "" }, "access_key"],
      [{ secret_key: "has space" }, "secret_key"],
      [{ name: "" }, "name"],
      // A misspelt passphrase must not silently leave backups unencrypted.
      [{ encryption_pasphrase: "a-long-enough-passphrase" }, "encryption_pasphrase"],
    ];
    for (const [extra, field] of cases) {
      const r = await track(team.api.post("/s3-storages", storageBody(extra)));
      expect(r.status, `${JSON.stringify(extra)} -> ${JSON.stringify(r.body)}`).toBe(422);
      expect(Object.keys(r.body.errors ?? {}), JSON.stringify(extra)).toContain(field);
    }
    const { secret_key: _s, ...noSecret } = storageBody();
    expect((await track(team.api.post("/s3-storages", noSecret))).status).toBe(422);
    expect(await t.instance.database.prisma.s3Storage.count()).toBe(before);

    const s = (await track(team.api.post("/s3-storages", storageBody()))).body.data;
    for (const body of [{}, { bucket: "Nope" }, { endpoint: "gopher://x" }, { path_style: "yes" }, { encryption_pasphrase: "a-long-enough-passphrase" }]) {
      const r = await track(team.api.patch(`/s3-storages/${s.id}`, body));
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    expect((await track(team.api.get(`/s3-storages/${s.id}`))).body).toMatchObject({ bucket: s3.bucket, endpoint: s3.endpoint, path_style: true });
  });

  it("members and viewers read; only owners and admins change; a read-only token changes nothing", async () => {
    const s = (await track(team.api.post("/s3-storages", storageBody({ name: "guarded" })))).body.data;
    const member = await t.newMember(team.teamId, "member");
    const viewer = await t.newMember(team.teamId, "viewer");
    const admin = await t.newMember(team.teamId, "admin");
    const readOnly = await t.newMember(team.teamId, "owner", ["read"]);
    for (const who of [member, viewer, readOnly]) {
      const api = t.api(who.token);
      expect((await track(api.get(`/s3-storages/${s.id}`))).status).toBe(200);
      expect((await track(api.post("/s3-storages", storageBody()))).status).toBe(403);
      expect((await track(api.patch(`/s3-storages/${s.id}`, { name: "x" }))).status).toBe(403);
      expect((await track(api.post(`/s3-storages/${s.id}/test`))).status).toBe(403);
      expect((await track(api.delete(`/s3-storages/${s.id}`))).status).toBe(403);
    }
    const readOnlyErr = await track(t.api(readOnly.token).patch(`/s3-storages/${s.id}`, { name: "x" }));
    expect(readOnlyErr.body.message).toBe("Invalid ability provided.");
    expect((await track(team.api.get(`/s3-storages/${s.id}`))).body.name).toBe("guarded");
    const byAdmin = await track(t.api(admin.token).patch(`/s3-storages/${s.id}`, { name: "by-admin" }));
    expect(byAdmin.status).toBe(200);
  });

  it("another team's storage is 404 on every route", async () => {
    const s = (await track(team.api.post("/s3-storages", storageBody({ name: "mine" })))).body.data;
    const other = await t.newTeam();
    for (const r of [
      other.api.get(`/s3-storages/${s.id}`),
      other.api.patch(`/s3-storages/${s.id}`, { name: "stolen" }),
      other.api.post(`/s3-storages/${s.id}/test`),
      other.api.delete(`/s3-storages/${s.id}`),
    ]) {
      const res = await track(r);
      expect(res.status).toBe(404);
      expect(JSON.stringify(res.body)).not.toContain(s.uuid);
    }
    expect((await track(other.api.get("/s3-storages"))).body.data).toEqual([]);
    expect((await track(team.api.get(`/s3-storages/${s.id}`))).body.name).toBe("mine");
    for (const bad of ["abc", "0", "1.5", "0x10", "-1"]) expect((await track(other.api.get(`/s3-storages/${bad}`))).status).toBe(422);
  });
});

describe("connection test against a real S3 server", () => {
  it("good credentials: usable, an object was written and removed, is_usable recorded", async () => {
    const s = (await track(team.api.post("/s3-storages", storageBody()))).body.data;
    const rejectedBefore = s3.rejected();
    const r = await track(team.api.post(`/s3-storages/${s.id}/test`));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ message: expect.any(String), usable: true });
    expect(s3.rejected()).toBe(rejectedBefore);
    expect(await s3.objects("capstan/prod/")).toEqual([]);
    const after = (await track(team.api.get(`/s3-storages/${s.id}`))).body;
    expect(after.is_usable).toBe(true);
    expect(Date.parse(after.last_tested_at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it("a wrong secret: 200, usable false with the server's reason, is_usable false", async () => {
    const s = (await track(team.api.post("/s3-storages", storageBody({ secret_key: "wrong-secret" })))).body.data;
    const rejectedBefore = s3.rejected();
    const r = await track(team.api.post(`/s3-storages/${s.id}/test`));
    expect(r.status).toBe(200);
    expect(r.body.usable).toBe(false);
    expect(r.body.error).toMatch(/SignatureDoesNotMatch|403/);
    expect(r.body.error.length).toBeLessThanOrEqual(200);
    expect(s3.rejected()).toBeGreaterThan(rejectedBefore);
    const after = (await track(team.api.get(`/s3-storages/${s.id}`))).body;
    expect(after.is_usable).toBe(false);
    expect(after.last_tested_at).not.toBeNull();
  });

  it("an unknown access key and a missing bucket say why", async () => {
    const badKey = (await track(team.api.post("/s3-storages", storageBody({ access_key: "AKIANOTKNOWN" })))).body.data;
    const r1 = await track(team.api.post(`/s3-storages/${badKey.id}/test`));
    expect(r1.body).toMatchObject({ usable: false, error: expect.stringMatching(/InvalidAccessKeyId|403/) });
    const noBucket = (await track(team.api.post("/s3-storages", storageBody({ bucket: "no-such-bucket" })))).body.data;
    const r2 = await track(team.api.post(`/s3-storages/${noBucket.id}/test`));
    expect(r2.body).toMatchObject({ usable: false, error: expect.stringMatching(/NoSuchBucket|404|NotFound/) });
  });

  it("a storage that does not answer fails within the test's bound", async () => {
    // A listening socket that never answers: the test gives up with a reason instead of hanging.
    const net = await import("node:net");
    const silent = net.createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const port = (silent.address() as { port: number }).port;
    try {
      const s = (await track(team.api.post("/s3-storages", storageBody({ endpoint: `http://127.0.0.1:${port}` })))).body.data;
      const started = Date.now();
      const r = await track(team.api.post(`/s3-storages/${s.id}/test`));
      expect(r.status).toBe(200);
      expect(r.body.usable).toBe(false);
      expect(r.body.error).toMatch(/did not answer|timed? ?out|Timeout/i);
      expect(Date.now() - started).toBeLessThan(25_000);
    } finally {
      silent.close();
    }
  }, 40_000);
});

describe("request forgery guard (instance without PLATFORM_ALLOW_PRIVATE_ENDPOINTS)", () => {
  it("refuses loopback, link-local and metadata endpoints when saving; private networks are fine", async () => {
    const api = strict.api(team.token);
    const before = await t.instance.database.prisma.s3Storage.count();
    for (const endpoint of [
      s3.endpoint,
      "http://localhost:9000",
      "http://localhost.:9000",
      "http://169.254.169.254",
      "http://[::1]:9000",
      "http://[::ffff:127.0.0.1]:9000",
      "http://100.100.100.200",
      "http://[fe80::1]:9000",
      "http://0.0.0.0:9000",
    ]) {
      const r = await track(api.post("/s3-storages", storageBody({ endpoint })));
      expect(r.status, `${endpoint}: ${JSON.stringify(r.body)}`).toBe(422);
      expect(r.body.errors.endpoint[0]).toMatch(/loopback, link-local or metadata address; refused .*PLATFORM_ALLOW_PRIVATE_ENDPOINTS/);
    }
    expect(await t.instance.database.prisma.s3Storage.count()).toBe(before);
    // Self-hosted S3 servers on private networks (saving does not contact them).
    for (const endpoint of ["http://10.0.0.5:9000", "http://172.16.0.1:9000", "http://192.168.1.10", "http://[fd12:3456::1]:9000"]) {
      const r = await track(api.post("/s3-storages", storageBody({ endpoint })));
      expect(r.status, `${endpoint}: ${JSON.stringify(r.body)}`).toBe(201);
      expect(r.body.data.endpoint).toBe(endpoint);
    }
    const s = (await track(api.post("/s3-storages", storageBody({ endpoint: "https://s3.eu-central-1.amazonaws.com" })))).body.data;
    expect((await track(api.patch(`/s3-storages/${s.id}`, { endpoint: "http://169.254.169.254" }))).status).toBe(422);
    expect((await track(api.get(`/s3-storages/${s.id}`))).body.endpoint).toBe("https://s3.eu-central-1.amazonaws.com");
    // The allowing instance accepts the same endpoints.
    expect((await track(team.api.post("/s3-storages", storageBody({ endpoint: "http://169.254.169.254" })))).status).toBe(201);
  });

  it("refuses at connect time too: a storage saved where allowed is not contacted from an instance that does not allow it", async () => {
    // Saved through the allowing replica, tested through the strict one: no request reaches the server.
    const loop = (await track(team.api.post("/s3-storages", storageBody()))).body.data;
    const metadata = (await track(team.api.post("/s3-storages", storageBody({ endpoint: "http://169.254.169.254" })))).body.data;
    const before = { rejected: s3.rejected(), objects: await s3.objects() };
    for (const s of [loop, metadata]) {
      const started = Date.now();
      const r = await track(strict.api(team.token).post(`/s3-storages/${s.id}/test`));
      expect(r.status).toBe(200);
      expect(r.body.usable).toBe(false);
      expect(r.body.error).toMatch(/refused.*PLATFORM_ALLOW_PRIVATE_ENDPOINTS/);
      expect(Date.now() - started).toBeLessThan(5_000);
    }
    expect(s3.rejected()).toBe(before.rejected);
    expect(await s3.objects()).toEqual(before.objects);
    // The same loopback storage works from the allowing replica.
    expect((await track(team.api.post(`/s3-storages/${loop.id}/test`))).body.usable).toBe(true);
  });

  it("does not echo what an arbitrary server answers beyond a short reason", async () => {
    // An "S3 endpoint" that answers every request with a long HTML page.
    const http = await import("node:http");
    const page = `<html><body>${"SECRET-INTERNAL-PAGE ".repeat(500)}</body></html>`;
    const srv = http.createServer((_req, res) => {
      res.writeHead(403, { "content-type": "text/html" });
      res.end(page);
    });
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    try {
      const port = (srv.address() as { port: number }).port;
      const s = (await track(team.api.post("/s3-storages", storageBody({ endpoint: `http://127.0.0.1:${port}` })))).body.data;
      const r = await track(team.api.post(`/s3-storages/${s.id}/test`));
      expect(r.body.usable).toBe(false);
      expect(r.body.error.length).toBeLessThanOrEqual(200);
      expect(JSON.stringify(r.body).split("SECRET-INTERNAL-PAGE").length - 1).toBeLessThanOrEqual(3);
    } finally {
      srv.close();
    }
  });
});

describe("deletion", () => {
  it("refuses (409, saying why and what to do) while a schedule sends backups there, a backup's object is in it, or a run uploads to it", async () => {
    const s = (await track(team.api.post("/s3-storages", storageBody({ name: "in-use" })))).body.data;
    expect(s).toMatchObject({ schedule_count: 0, backup_count: 0 });
    const db = t.instance.database.prisma;
    // Rows pointing at the storage (schedules and runs themselves are tested in backups.test.ts).
    const schedule = await db.backupSchedule.create({ data: { uuid: randomBytes(8).toString("hex"), teamId: team.teamId, frequency: "@daily", s3StorageId: s.id } });
    const execution = await db.backupExecution.create({
      data: { uuid: randomBytes(8).toString("hex"), scheduleId: schedule.id, trigger: "manual", status: "success", s3StorageId: s.id, s3Key: "capstan/prod/db/x.sql.gz" },
    });
    expect((await track(team.api.get(`/s3-storages/${s.id}`))).body).toMatchObject({ schedule_count: 1, backup_count: 1 });
    const both = await track(team.api.delete(`/s3-storages/${s.id}`));
    expect(both.status).toBe(409);
    expect(both.body.message).toMatch(/1 backup schedule\(s\) send backups to it \(move them to another storage or delete them\)/);
    expect(both.body.message).toMatch(/1 backup\(s\) have their object in it \(.*deleting an execution removes its object too\)/);

    // The schedule moved away: the backup's object still needs the storage.
    await db.backupSchedule.update({ where: { id: schedule.id }, data: { s3StorageId: null } });
    const object = await track(team.api.delete(`/s3-storages/${s.id}`));
    expect(object.status).toBe(409);
    expect(object.body.message).not.toMatch(/schedule/);
    expect(object.body.message).toMatch(/1 backup\(s\) have their object in it/);

    // A run on its way to the storage (no object yet) needs it too.
    await db.backupExecution.update({ where: { id: execution.id }, data: { status: "running", s3Key: null } });
    expect((await track(team.api.get(`/s3-storages/${s.id}`))).body.backup_count).toBe(0);
    const running = await track(team.api.delete(`/s3-storages/${s.id}`));
    expect(running.status).toBe(409);
    expect(running.body.message).toMatch(/1 backup run\(s\) are uploading to it \(wait until they end\)/);
    expect(await db.s3Storage.count({ where: { id: s.id } })).toBe(1);

    // A failed run left nothing there: the storage goes, the execution keeps its other fields.
    await db.backupExecution.update({ where: { id: execution.id }, data: { status: "failed" } });
    expect((await track(team.api.delete(`/s3-storages/${s.id}`))).status).toBe(200);
    expect(await db.backupExecution.findUniqueOrThrow({ where: { id: execution.id } })).toMatchObject({ status: "failed", s3StorageId: null });
    await db.backupSchedule.delete({ where: { id: schedule.id } });
  });

  it.skipIf(!process.env.CAPSTAN_TEST_PG_URL)("PostgreSQL: a run claimed while the delete runs is seen, not orphaned by the delete", async () => {
    const s = (await track(team.api.post("/s3-storages", storageBody({ name: "racing" })))).body.data;
    const db = t.instance.database.prisma;
    const schedule = await db.backupSchedule.create({ data: { uuid: randomBytes(8).toString("hex"), teamId: team.teamId, frequency: "@daily" } });
    // A claim's transaction inserted its execution (naming the storage) and has not committed yet.
    let commit!: () => void;
    const held = new Promise<void>((r) => (commit = r));
    let inserted!: () => void;
    const insertedP = new Promise<void>((r) => (inserted = r));
    const claim = db.$transaction(
      async (tx) => {
        await tx.backupExecution.create({ data: { uuid: randomBytes(8).toString("hex"), scheduleId: schedule.id, trigger: "manual", status: "queued", s3StorageId: s.id } });
        inserted();
        await held;
      },
      { timeout: 20_000 },
    );
    await insertedP;
    let settled = false;
    const del = track(team.api.delete(`/s3-storages/${s.id}`)).finally(() => (settled = true));
    // The delete waits for the claim (its row lock), rather than counting without it.
    await new Promise((r) => setTimeout(r, 500));
    expect(settled).toBe(false);
    commit();
    await claim;
    const r = await del;
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.message).toMatch(/1 backup run\(s\) are uploading to it/);
    expect(await db.backupExecution.count({ where: { scheduleId: schedule.id, s3StorageId: s.id } })).toBe(1);
    await db.backupSchedule.delete({ where: { id: schedule.id } });
  });
});

describe("secrets", () => {
  it("no response of this file contained a key, a secret or a passphrase", () => {
    expect(seen.length).toBeGreaterThan(50);
    const all = seen.join("\n");
    for (const secret of [ACCESS_KEY, SECRET_KEY, `${SECRET_KEY}-2`, PASSPHRASE, s3.secretKey, s3.accessKey, "wrong-secret"]) {
      expect(all).not.toContain(secret);
    }
  });
});
