/**
 * Standalone databases (spec 4.5): the eight create paths, validation, placement lookups inside
 * the caller's team, public ports, list and detail with the masking rules. Lifecycle (actions,
 * PATCH, delete, variables, status) is in databases-lifecycle.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseEngine } from "@capstan/shared";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { appWorld, connectServerAgent, newServer, ok, placement, until, type AppWorld } from "./support/applications.js";
import { ENGINES, ENGINE_NAMES, GENERATED, ISO, UUID, answerJob, createDb, deployed, jobCount } from "./support/standalone-databases.js";
import { requestStatements } from "./support/statements.js";

let t: TestInstance;
let w: AppWorld;
let agent: ScriptedAgent;
const keys = new KeyFactory();

beforeAll(async () => {
  t = await startTestInstance();
  w = await appWorld(t, keys);
  agent = await connectServerAgent(t, w);
});
afterAll(async () => {
  agent?.close();
  await t?.close();
  keys.cleanup();
});

const prisma = () => t.instance.database.prisma;
const counts = async () => ({ databases: await prisma().standaloneDatabase.count(), jobs: await jobCount(prisma()) });

describe("create, one path per engine", () => {
  it.each(ENGINE_NAMES)("POST /databases/%s: 201 {uuid, name, type, internal_db_url}, deployed right away with the URL's credentials", async (engine) => {
    const e = ENGINES[engine];
    const res = await w.api.post(`/databases/${engine}`, placement(w));
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(["internal_db_url", "name", "type", "uuid"]);
    const { uuid, name, type, internal_db_url: url } = res.body;
    expect(uuid).toMatch(UUID);
    expect(name).toBe(`${engine}-${uuid.slice(0, 8)}`);
    expect(type).toBe(`standalone-${engine}`);

    const u = new URL(url);
    expect(u.protocol).toBe(e.scheme);
    expect(u.hostname).toBe(uuid);
    expect(u.port).toBe(String(e.port));
    expect(decodeURIComponent(u.username)).toBe(e.user);
    expect(decodeURIComponent(u.password)).toMatch(GENERATED);
    expect(u.pathname).toBe(e.path);
    expect(u.search).toBe(e.search);

    // instant_deploy (default true): the agent is asked to run it with exactly those credentials.
    const job = await answerJob(agent, "db.deploy", deployed(uuid));
    const p = job.payload as any;
    expect(p).toMatchObject({
      db: { uuid, name },
      engine,
      image: e.image,
      env: {},
      network: "capstan",
      networks: [],
      ensure_networks: [],
      public_port: null,
      memory: null,
      cpus: null,
    });
    expect(p.credentials.password).toBe(decodeURIComponent(u.password));
    expect(p.credentials.user).toBe(e.userParam ? e.user : null);
    expect(p.credentials.database).toBe(e.databaseParam ? u.pathname.slice(1) : null);
    if (e.rootPasswordParam) {
      expect(p.credentials.root_password).toMatch(GENERATED);
      expect(p.credentials.root_password).not.toBe(p.credentials.password);
    } else expect(p.credentials.root_password).toBeNull();

    // The answer's status becomes the database's.
    await until(async () => (await w.api.get(`/databases/${uuid}`)).body.status === "running:healthy");

    // The detail shows the same URL and credentials by their create-path names.
    const detail = (await w.api.get(`/databases/${uuid}`)).body;
    expect(detail.internal_db_url).toBe(url);
    expect(detail.credentials[e.passwordParam]).toBe(p.credentials.password);
    if (e.userParam) expect(detail.credentials[e.userParam]).toBe(e.user);
    if (e.rootPasswordParam) expect(detail.credentials[e.rootPasswordParam]).toBe(p.credentials.root_password);
    expect(Object.keys(detail.credentials).sort()).toEqual([e.userParam, e.passwordParam, e.databaseParam, e.rootPasswordParam].filter(Boolean).sort());
  });

  it("takes the engine's own credential parameters; URLs percent-encode them", async () => {
    const password = "p@ss:w/rd#1?&%";
    const pg = await createDb(w, "postgresql", { postgres_user: "shop_owner", postgres_password: password, postgres_db: "shop" });
    const u = new URL(pg.internal_db_url);
    expect([decodeURIComponent(u.username), decodeURIComponent(u.password), u.pathname]).toEqual(["shop_owner", password, "/shop"]);
    expect(pg.internal_db_url).toBe(`postgres://shop_owner:${encodeURIComponent(password)}@${pg.uuid}:5432/shop`);

    const my = await createDb(w, "mysql", { mysql_user: "app", mysql_password: "app-password-1", mysql_root_password: "root-password-1", mysql_database: "orders" });
    expect(my.internal_db_url).toBe(`mysql://app:app-password-1@${my.uuid}:3306/orders`);
    const detail = (await w.api.get(`/databases/${my.uuid}`)).body;
    expect(detail.credentials).toEqual({ mysql_user: "app", mysql_password: "app-password-1", mysql_database: "orders", mysql_root_password: "root-password-1" });

    const mongo = await createDb(w, "mongodb", { mongo_initdb_root_username: "admin", mongo_initdb_root_password: "mongo-pass-1", mongo_initdb_database: "events" });
    expect(mongo.internal_db_url).toBe(`mongodb://admin:mongo-pass-1@${mongo.uuid}:27017/events?authSource=admin`);
    const redis = await createDb(w, "redis", { redis_password: "redis-pass-1" });
    expect(redis.internal_db_url).toBe(`redis://default:redis-pass-1@${redis.uuid}:6379/0`);
    const ch = await createDb(w, "clickhouse", { clickhouse_admin_user: "analyst", clickhouse_admin_password: "click-pass-1" });
    expect(ch.internal_db_url).toBe(`clickhouse://analyst:click-pass-1@${ch.uuid}:9000/default`);
    const events = await createDb(w, "clickhouse", { clickhouse_admin_user: "analyst", clickhouse_admin_password: "click-pass-1", clickhouse_db: "events_2024" });
    expect(events.internal_db_url).toBe(`clickhouse://analyst:click-pass-1@${events.uuid}:9000/events_2024`);
    expect((await w.api.get(`/databases/${events.uuid}`)).body.credentials).toEqual({
      clickhouse_admin_user: "analyst",
      clickhouse_admin_password: "click-pass-1",
      clickhouse_db: "events_2024",
    });
  });

  it("clickhouse_db reaches the agent: the deploy's and the backup's credentials name it", async () => {
    const res = await w.api.post("/databases/clickhouse", { ...placement(w), clickhouse_db: "analytics" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const uuid = res.body.uuid as string;
    const deploy = await answerJob(agent, "db.deploy", deployed(uuid));
    expect((deploy.payload as any).credentials).toMatchObject({ user: "default", database: "analytics" });
    const schedule = await w.api.post(`/databases/${uuid}/backups`, { frequency: "@daily" });
    expect(schedule.status, JSON.stringify(schedule.body)).toBe(201);
    const run = await w.api.post(`/databases/${uuid}/backups/${schedule.body.data.uuid}/execute`);
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    const backup = await answerJob(agent, "db.backup", { error: "not run in this test" });
    expect((backup.payload as any).credentials).toMatchObject({ database: "analytics" });
  });

  it("a clickhouse database stored without a database name shows ClickHouse's default", async () => {
    const ch = await createDb(w, "clickhouse", { clickhouse_admin_password: "click-pass-1" });
    const box = t.instance.box;
    await prisma().standaloneDatabase.update({
      where: { uuid: ch.uuid },
      data: { credentials: box.seal(JSON.stringify({ user: "default", password: "click-pass-1", database: null, root_password: null })) },
    });
    const detail = (await w.api.get(`/databases/${ch.uuid}`)).body;
    expect(detail.credentials.clickhouse_db).toBe("default");
    expect(detail.internal_db_url).toBe(`clickhouse://default:click-pass-1@${ch.uuid}:9000/default`);
  });

  it("generates different strong passwords for every database, sealed at rest", async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const db = await createDb(w, "mariadb");
      const detail = (await w.api.get(`/databases/${db.uuid}`)).body;
      for (const pw of [detail.credentials.mariadb_password, detail.credentials.mariadb_root_password]) {
        expect(pw).toMatch(GENERATED);
        expect(seen.has(pw)).toBe(false);
        seen.add(pw);
      }
      const row = await prisma().standaloneDatabase.findUniqueOrThrow({ where: { uuid: db.uuid } });
      expect(row.credentials).toMatch(/^v1:/);
      expect(row.credentials).not.toContain(detail.credentials.mariadb_password);
    }
  });

  it("takes name, description, image, limits; instant_deploy=false queues nothing", async () => {
    const before = await counts();
    const db = await createDb(w, "redis", {
      name: "cache",
      description: "sessions",
      image: "registry.example.com:5000/cache/redis:7.2",
      limits_memory: "256M",
      limits_cpus: "0.5",
    });
    expect(await counts()).toEqual({ databases: before.databases + 1, jobs: before.jobs });
    const d = (await w.api.get(`/databases/${db.uuid}`)).body;
    expect(d).toMatchObject({ name: "cache", description: "sessions", image: "registry.example.com:5000/cache/redis:7.2", limits_memory: "256m", limits_cpus: "0.5", status: "exited" });
  });
});

describe("refused create requests change nothing", () => {
  const cases: [string, DatabaseEngine, Record<string, unknown>, string][] = [
    ["a user name that is not an identifier", "postgresql", { postgres_user: "1st-user" }, "postgres_user"],
    ["a database name with a quote", "postgresql", { postgres_db: "shop'; DROP" }, "postgres_db"],
    ["a user name too long for MySQL", "mysql", { mysql_user: "u".repeat(33) }, "mysql_user"],
    ["root as the regular MySQL user", "mysql", { mysql_user: "root" }, "mysql_user"],
    ["root as the regular MariaDB user", "mariadb", { mariadb_user: "ROOT" }, "mariadb_user"],
    ["a short password", "postgresql", { postgres_password: "short" }, "postgres_password"],
    ["a password with a space", "redis", { redis_password: "two words here" }, "redis_password"],
    ["a password with a control character", "keydb", { keydb_password: "abcdefgh\n" }, "keydb_password"],
    ["a password that is too long", "dragonfly", { dragonfly_password: "x".repeat(129) }, "dragonfly_password"],
    ["a password that is not a string", "clickhouse", { clickhouse_admin_password: 12345678 }, "clickhouse_admin_password"],
    ["a ClickHouse database name that is not an identifier", "clickhouse", { clickhouse_db: "web-events" }, "clickhouse_db"],
    ["a ClickHouse database name too long", "clickhouse", { clickhouse_db: "d".repeat(65) }, "clickhouse_db"],
    ["ClickHouse's system database", "clickhouse", { clickhouse_db: "system" }, "clickhouse_db"],
    ["a bad image reference", "postgresql", { image: "Postgres:17 alpine" }, "image"],
    ["an option-like image", "mongodb", { image: "-v/:/host" }, "image"],
    ["is_public without a port", "postgresql", { is_public: true }, "public_port"],
    ["a privileged public port", "postgresql", { is_public: true, public_port: 80 }, "public_port"],
    ["a public port out of range", "redis", { is_public: true, public_port: 70000 }, "public_port"],
    ["a memory limit below the engine's minimum", "postgresql", { limits_memory: "1m" }, "limits_memory"],
    ["a CPU limit of zero", "postgresql", { limits_cpus: "0" }, "limits_cpus"],
    ["a missing project", "postgresql", { project_uuid: undefined }, "project_uuid"],
  ];
  it.each(cases)("%s -> 422 naming the field", async (_what, engine, extra, field) => {
    const before = await counts();
    const res = await w.api.post(`/databases/${engine}`, { ...placement(w), ...extra });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(res.body.message).toBe("The given data was invalid.");
    expect(Object.keys(res.body.errors)).toContain(field);
    expect(await counts()).toEqual(before);
  });

  it("unknown fields, and another engine's parameters, are refused (422)", async () => {
    const before = await counts();
    for (const [engine, extra, key] of [
      ["postgresql", { postgres_pasword: "typo-in-the-name" }, "postgres_pasword"],
      ["redis", { postgres_password: "not-for-redis-1" }, "postgres_password"],
      ["clickhouse", { postgres_db: "x" }, "postgres_db"],
      ["postgresql", { clickhouse_db: "x" }, "clickhouse_db"],
      ["mysql", { fqdn: "db.example.com" }, "fqdn"],
    ] as const) {
      const res = await w.api.post(`/databases/${engine}`, { ...placement(w), ...extra });
      expect(res.status, `${engine} ${JSON.stringify(res.body)}`).toBe(422);
      expect(JSON.stringify(res.body.errors)).toContain(key);
    }
    expect(await counts()).toEqual(before);
  });

  it("a path that names no engine is a 404, not a create", async () => {
    const before = await counts();
    for (const path of ["/databases/oracle", "/databases/postgres", `/databases/${(await createDb(w)).uuid}`]) {
      const mid = await counts();
      const res = await w.api.post(path, { ...placement(w), postgres_password: "whatever-1" });
      expect(res.status, path).toBe(404);
      expect(res.body).toEqual({ message: "Not found." });
      expect(await counts()).toEqual(mid);
    }
    expect((await counts()).databases).toBe(before.databases + 1);
  });

  it("unknown or other team's project, environment, server or destination -> 404", async () => {
    const other = await appWorld(t, keys);
    const otherServerOfMine = await newServer(w.api, w.keyUuid, "second");
    const before = await counts();
    const variants: [Record<string, unknown>, string][] = [
      [{ project_uuid: other.project.uuid }, "Project not found."],
      [{ project_uuid: "00000000-0000-4000-8000-000000000000" }, "Project not found."],
      [{ environment_name: "staging" }, "Environment not found."],
      [{ server_uuid: other.server.uuid, destination_uuid: other.server.destinationUuid }, "Server not found."],
      [{ destination_uuid: other.server.destinationUuid }, "Destination not found."],
      // A destination of another server of the same team is not one of this server's.
      [{ destination_uuid: otherServerOfMine.destinationUuid }, "Destination not found."],
    ];
    for (const [extra, message] of variants) {
      const res = await w.api.post("/databases/postgresql", { ...placement(w), ...extra });
      expect(res.status, JSON.stringify(extra)).toBe(404);
      expect(res.body).toEqual({ message });
    }
    expect(await counts()).toEqual(before);
  });

  it("needs full access to the environment and the write scope", async () => {
    const deployer = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: deployer.userId, permission_level: "deploy" }), "grant");
    const readOnly = await t.newMember(w.team.teamId, "admin", ["read"]);
    const before = await counts();
    const asDeployer = await t.api(deployer.token).post("/databases/postgresql", placement(w));
    expect(asDeployer.status).toBe(403);
    const asReader = await t.api(readOnly.token).post("/databases/postgresql", placement(w));
    expect(asReader.status).toBe(403);
    expect(asReader.body).toEqual({ message: "Invalid ability provided." });
    const stranger = await t.newMember(w.team.teamId, "member");
    expect((await t.api(stranger.token).post("/databases/postgresql", placement(w))).status).toBe(404);
    expect(await counts()).toEqual(before);
  });
});

describe("public ports", () => {
  const port = () => 20_000 + Math.floor(Math.random() * 20_000);

  it("publishes on public_port; a second public database on that port of the server is a 409, another server is fine", async () => {
    const p = port();
    const first = await createDb(w, "postgresql", { is_public: true, public_port: p, name: "first" });
    const before = await counts();
    const clash = await w.api.post("/databases/redis", { ...placement(w), is_public: true, public_port: p });
    expect(clash.status).toBe(409);
    expect(clash.body.message).toBe(`Port ${p} of server web is already published by database first; choose another public_port.`);
    expect(await counts()).toEqual(before);

    const second = await newServer(w.api, w.keyUuid, "other");
    const elsewhere = await w.api.post("/databases/redis", { ...placement(w), server_uuid: second.uuid, destination_uuid: second.destinationUuid, is_public: true, public_port: p, instant_deploy: false });
    expect(elsewhere.status, JSON.stringify(elsewhere.body)).toBe(201);

    const d = (await w.api.get(`/databases/${first.uuid}`)).body;
    expect(d.is_public).toBe(true);
    expect(d.public_port).toBe(p);
    expect(d.external_db_url).toBe(d.internal_db_url.replace(`@${first.uuid}:5432/`, `@10.0.0.5:${p}/`));
  });

  it("the proxy's ports and the server's SSH port are refused (422)", async () => {
    // An instance whose proxy listens on unprivileged ports (the defaults, 80 and 443, are below the allowed range anyway).
    const t2 = await startTestInstance({ PLATFORM_PROXY_HTTP_PORT: "8080", PLATFORM_PROXY_HTTPS_PORT: "8443" });
    try {
      const w2 = await appWorld(t2, keys);
      const srv = await ok(w2.api.post("/servers", { name: "ssh-high", ip: "10.0.0.9", port: 2222, private_key_uuid: w2.keyUuid }), "server");
      const dest = (await ok(w2.api.get(`/servers/${srv.uuid}`), "detail")).destinations[0].uuid;
      for (const [p, where, message] of [
        [8080, placement(w2), "Port 8080 is the reverse proxy's HTTP port on server web; choose another."],
        [8443, placement(w2), "Port 8443 is the reverse proxy's HTTPS port on server web; choose another."],
        [2222, { ...placement(w2), server_uuid: srv.uuid, destination_uuid: dest }, "Port 2222 is the server's SSH port on server ssh-high; choose another."],
      ] as const) {
        const res = await w2.api.post("/databases/postgresql", { ...where, is_public: true, public_port: p });
        expect(res.status, String(p)).toBe(422);
        expect(res.body.errors).toEqual({ public_port: [message] });
      }
      expect(await t2.instance.database.prisma.standaloneDatabase.count()).toBe(0);
      // The same ports while closed are only remembered: no conflict.
      expect((await w2.api.post("/databases/postgresql", { ...placement(w2), public_port: 8080, instant_deploy: false })).status).toBe(201);
    } finally {
      await t2.close();
    }
  });

  it("a remembered port of a closed database does not block; reopening it then collides", async () => {
    const p = port();
    const closed = await createDb(w, "postgresql", { is_public: false, public_port: p, name: "closed" });
    const open = await createDb(w, "postgresql", { is_public: true, public_port: p, name: "open" });
    expect((await w.api.get(`/databases/${closed.uuid}`)).body).toMatchObject({ is_public: false, public_port: p, external_db_url: null });
    const reopen = await w.api.patch(`/databases/${closed.uuid}`, { is_public: true });
    expect(reopen.status).toBe(409);
    expect(reopen.body.message).toMatch(/already published by database open/);
    expect((await w.api.get(`/databases/${closed.uuid}`)).body.is_public).toBe(false);
    // Once the open one moves, the closed one can open on its port.
    expect((await w.api.patch(`/databases/${open.uuid}`, { public_port: p + 1 })).status).toBe(200);
    expect((await w.api.patch(`/databases/${closed.uuid}`, { is_public: true })).status).toBe(200);
  });

  it("concurrent creates on one port: exactly one wins", async () => {
    const p = port();
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => w.api.post("/databases/redis", { ...placement(w), is_public: true, public_port: p, name: `race-${i}`, instant_deploy: false })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect(await prisma().standaloneDatabase.count({ where: { publicPort: p, isPublic: true } })).toBe(1);
  });
});

describe("list and detail", () => {
  it("lists the team's databases with the spec's fields, paginated, never another team's", async () => {
    const other = await appWorld(t, keys);
    const foreign = await createDb(other, "redis");
    const mine = await createDb(w, "mongodb", { name: "listed" });
    const list = await w.api.get("/databases");
    expect(list.status).toBe(200);
    const item = list.body.data.find((d: any) => d.uuid === mine.uuid);
    expect(item).toEqual({
      uuid: mine.uuid,
      name: "listed",
      type: "standalone-mongodb",
      status: "exited",
      image: "mongo:8",
      is_public: false,
      public_port: null,
      project_uuid: w.project.uuid,
      environment_name: "production",
      server_uuid: w.server.uuid,
      created_at: expect.stringMatching(ISO),
      last_error: null,
      last_error_at: null,
    });
    expect(JSON.stringify(list.body)).not.toContain(foreign.uuid);
    expect(list.body.data.every((d: any) => d.project_uuid === w.project.uuid || d.server_uuid !== other.server.uuid)).toBe(true);
    // Oldest first, and pages of it.
    const all = list.body.data.map((d: any) => d.uuid);
    const page = await w.api.get("/databases", { page: 2, per_page: 3 });
    expect(page.body.data.map((d: any) => d.uuid)).toEqual(all.slice(3, 6));
    expect(page.body.meta).toEqual({ current_page: 2, per_page: 3, total: all.length, last_page: Math.ceil(all.length / 3) });
    const otherList = await other.api.get("/databases");
    expect(otherList.body.data.map((d: any) => d.uuid)).toEqual([foreign.uuid]);
  });

  it("a member sees only databases of environments it may see", async () => {
    await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "staging" }), "env");
    const staging = await createDb(w, "redis", { environment_name: "staging" });
    const prod = await createDb(w, "redis");
    const member = await t.newMember(w.team.teamId, "member");
    const envId = (await ok(w.api.get(`/projects/${w.project.uuid}/staging`), "env")).id;
    await ok(w.api.post("/permissions/environment", { environment_id: envId, user_id: member.userId, permission_level: "view_only" }), "grant");
    const api = t.api(member.token);
    const list = await api.get("/databases");
    expect(list.body.data.map((d: any) => d.uuid)).toEqual([staging.uuid]);
    expect((await api.get(`/databases/${prod.uuid}`)).status).toBe(404);
    expect((await api.get(`/databases/${staging.uuid}`)).status).toBe(200);
  });

  it("shows the full configuration; passwords only to those who may manage it", async () => {
    const db = await createDb(w, "postgresql", { postgres_password: "visible-to-managers", is_public: true, public_port: 25432, name: "masked" });
    await ok(w.api.post(`/databases/${db.uuid}/envs`, { key: "TZ", value: "Europe/Berlin" }), "env");
    const owner = (await w.api.get(`/databases/${db.uuid}`)).body;
    expect(owner).toEqual({
      id: expect.any(Number),
      uuid: db.uuid,
      name: "masked",
      type: "standalone-postgresql",
      engine: "postgresql",
      status: "exited",
      image: "postgres:17-alpine",
      is_public: true,
      public_port: 25432,
      description: "",
      project_uuid: w.project.uuid,
      project_name: "shop",
      environment_name: "production",
      environment_uuid: expect.stringMatching(UUID),
      server_uuid: w.server.uuid,
      destination_uuid: w.server.destinationUuid,
      limits_memory: null,
      limits_cpus: null,
      internal_db_url: `postgres://postgres:visible-to-managers@${db.uuid}:5432/postgres`,
      external_db_url: "postgres://postgres:visible-to-managers@10.0.0.5:25432/postgres",
      credentials: { postgres_user: "postgres", postgres_password: "visible-to-managers", postgres_db: "postgres" },
      credentials_masked: false,
      envs: [{ uuid: expect.stringMatching(UUID), key: "TZ", value: null, created_at: expect.stringMatching(ISO), updated_at: expect.stringMatching(ISO) }],
      backup_schedules: [],
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
      last_error: null,
      last_error_at: null,
    });

    const masked = {
      internal_db_url: `postgres://postgres:********@${db.uuid}:5432/postgres`,
      external_db_url: "postgres://postgres:********@10.0.0.5:25432/postgres",
      credentials: { postgres_user: "postgres", postgres_password: null, postgres_db: "postgres" },
      credentials_masked: true,
    };
    const viewer = await t.newMember(w.team.teamId, "viewer");
    const deployer = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: deployer.userId, permission_level: "deploy" }), "grant");
    for (const token of [viewer.token, deployer.token]) {
      const res = await t.api(token).get(`/databases/${db.uuid}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject(masked);
      expect(JSON.stringify(res.body)).not.toContain("visible-to-managers");
    }
    const manager = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: manager.userId, permission_level: "full_access" }), "grant");
    expect((await t.api(manager.token).get(`/databases/${db.uuid}`)).body.credentials.postgres_password).toBe("visible-to-managers");
    // An automation token of the team (no user) sees them too, as owners and admins do.
    const automation = await t.instance.admin.createToken({ teamId: w.team.teamId, name: "ci", scopes: ["read"] });
    expect((await t.api(automation).get(`/databases/${db.uuid}`)).body.credentials_masked).toBe(false);
  });

  it("the environment view lists its databases like GET /databases, only its own and only to who may see them", async () => {
    const x = await appWorld(t, keys);
    await ok(x.api.post(`/projects/${x.project.uuid}/environments`, { name: "qa" }), "env");
    const inQa = await createDb(x, "redis", { environment_name: "qa", name: "qa-cache" });
    const inProd = await createDb(x, "postgresql", { name: "prod-db" });
    const app = await ok(x.api.post("/applications/dockerimage", { ...placement(x, "qa"), docker_registry_image_name: "nginx:1.27" }), "app");
    const qa = await x.api.get(`/projects/${x.project.uuid}/qa`);
    expect(qa.status).toBe(200);
    const fromList = (await x.api.get("/databases")).body.data.find((d: any) => d.uuid === inQa.uuid);
    expect(qa.body.databases).toEqual([fromList]);
    expect(qa.body.databases[0]).toMatchObject({ uuid: inQa.uuid, name: "qa-cache", type: "standalone-redis", status: "exited", is_public: false, environment_name: "qa" });
    expect(qa.body.applications.map((a: any) => a.uuid)).toEqual([app.uuid]);
    const prod = await x.api.get(`/projects/${x.project.uuid}/production`);
    expect(prod.body.databases.map((d: any) => d.uuid)).toEqual([inProd.uuid]);
    // By uuid too; a member allowed only in qa sees qa's databases and not production at all.
    expect((await x.api.get(`/projects/${x.project.uuid}/${qa.body.uuid}`)).body.databases).toEqual(qa.body.databases);
    const member = await t.newMember(x.team.teamId, "member");
    await ok(x.api.post("/permissions/environment", { environment_id: qa.body.id, user_id: member.userId, permission_level: "view_only" }), "grant");
    expect((await t.api(member.token).get(`/projects/${x.project.uuid}/qa`)).body.databases.map((d: any) => d.uuid)).toEqual([inQa.uuid]);
    expect((await t.api(member.token).get(`/projects/${x.project.uuid}/production`)).status).toBe(404);
  });

  it("the environment view is never stale: not cached, so status changes without a project write show at once", async () => {
    const x = await appWorld(t, keys);
    const db = await createDb(x, "redis");
    const path = `/projects/${x.project.uuid}/production`;
    const cache = t.instance.app.locals.responseCache as { stats(): { hits: number; state: string } };
    const hits = () => cache.stats().hits;
    // The cache is on here: the project view is served from it on a repeat.
    await x.api.get(`/projects/${x.project.uuid}`);
    const warm = hits();
    await x.api.get(`/projects/${x.project.uuid}`);
    expect(cache.stats().state).toBe("on");
    expect(hits()).toBe(warm + 1);
    expect((await x.api.get(path)).body.databases[0]).toMatchObject({ uuid: db.uuid, status: "exited", last_error: null });
    // Writes the TeamVersion triggers do not see (StandaloneDatabase's watch only inserts, deletes and moves): an agent's report, a job's outcome.
    await prisma().standaloneDatabase.update({ where: { uuid: db.uuid }, data: { status: "running:healthy" } });
    const before = hits();
    expect((await x.api.get(path)).body.databases[0]).toMatchObject({ uuid: db.uuid, status: "running:healthy" });
    await prisma().standaloneDatabase.update({ where: { uuid: db.uuid }, data: { lastError: "boom", lastErrorAt: new Date() } });
    expect((await x.api.get(path)).body.databases[0]).toMatchObject({ last_error: "boom", last_error_at: expect.stringMatching(ISO) });
    expect(hits()).toBe(before);
    // The cached project view carries no statuses, only counts (issue 15), which those writes do not change.
    const viewed = (await x.api.get(`/projects/${x.project.uuid}`)).body;
    expect(Object.keys(viewed).sort()).toEqual(["created_at", "description", "environments", "name", "resource_counts", "uuid"]);
    expect(viewed.resource_counts).toEqual({ applications: 0, databases: 1, services: 0, total: 1 });
    expect(hits()).toBe(before + 1);
  });

  it("the environment view reads its databases in one statement, however many there are", async () => {
    const x = await appWorld(t, keys);
    const reader = t.instance.services.reader;
    const statements = (path: string) => requestStatements(reader, async () => expect((await x.api.get(path)).status).toBe(200));
    await createDb(x, "redis");
    const one = await statements(`/projects/${x.project.uuid}/production`);
    for (let i = 0; i < 11; i++) await createDb(x, i % 2 ? "redis" : "postgresql");
    const many = await statements(`/projects/${x.project.uuid}/production`);
    expect((await x.api.get(`/projects/${x.project.uuid}/production`)).body.databases).toHaveLength(12);
    expect(many.length).toBe(one.length);
    expect(many.filter((sql) => sql.includes(`"StandaloneDatabase"`))).toHaveLength(1);
  });

  it("404 for another team's database, and for unknown ones", async () => {
    const other = await appWorld(t, keys);
    const foreign = await createDb(other, "redis", { redis_password: "foreign-secret-1" });
    for (const path of [`/databases/${foreign.uuid}`, "/databases/00000000-0000-4000-8000-000000000000"]) {
      const res = await w.api.get(path);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: "Database not found." });
    }
  });
});
