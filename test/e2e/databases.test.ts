/**
 * Issue 5 end to end, the way a user drives it: a real control plane, a real agent on this
 * machine's Docker Engine and a real S3-compatible server (s3rver behind a SigV4-checking front).
 * For every engine the tests can build an image for: create through the API, connect with the
 * returned internal_db_url from another container on the database's network, write rows, back
 * up to S3 (plain, and OpenPGP-encrypted when the storage has a passphrase), drop the data,
 * restore through the API, and the rows are back.
 *
 * Images: the production defaults are the engines' official images, which cannot be pulled
 * here. capstan-test/* images are built from Debian packages with the same conventions
 * (test/kit/README.md). mysql runs on MariaDB (Debian has no MySQL); the keydb and dragonfly
 * paths run on Redis 7 stand-ins named as such; clickhouse runs Debian's ClickHouse 18.16;
 * mongodb has no image here at all (not in Debian 12), so its path is covered by unit tests only.
 */
import type { ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, startTestInstance, type TeamFixture, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";
import { sh, until } from "./support/kit.js";
import { spawnLocalAgent, stopLocalAgent } from "./support/local-agent.js";
import { registerLocalServer } from "./support/local-server.js";

const RUN = randomBytes(3).toString("hex");
const TIMEOUT_S = 240;

let t: TestInstance;
let team: TeamFixture;
let agent: ChildProcess | null = null;
let stateDir = "";
let s3: S3Server;
let server: { uuid: string; destination: string };
let project: string;
let plainStorage: number;
let sealedStorage: number;
const PASSPHRASE = `pass ${RUN} "quoted" $dollar`;
const keys = new KeyFactory();

/** How the test talks to one engine: a client image and argv for a statement, from the URL. */
interface EngineCase {
  engine: string;
  image: string;
  body: Record<string, unknown>;
  /** the database internal_db_url must name, when the body names one */
  database?: string;
  /** argv run in the client container to execute `statement` against the database; `input` goes to its stdin */
  client(url: URL, statement: string): { image: string; argv: string[]; input?: string };
  write: string[];
  read: string;
  drop: string;
  /** what `read` prints when the rows are there */
  expect: RegExp;
}

const mysqlClient = (tool: string) => (url: URL, statement: string) => ({
  image: "capstan-test/mariadb:latest",
  argv: [tool, "-h", url.hostname, "-P", url.port, "-u", decodeURIComponent(url.username), `-p${decodeURIComponent(url.password)}`, url.pathname.slice(1), "-N", "-e", statement],
});
const redisClient = (url: URL, statement: string) => ({ image: "capstan-test/redis:latest", argv: ["redis-cli", "-u", url.toString(), ...statement.split(" ")] });
const xml = (v: string) => v.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");
// ClickHouse 18.16's client takes no URL and reads credentials from its config file (never argv):
// the URL's parts become flags, user and password a config written from stdin.
const clickhouseClient = (url: URL, statement: string) => ({
  image: "capstan-test/clickhouse:latest",
  argv: [
    "sh",
    "-c",
    'mkdir -p "$HOME/.clickhouse-client" && cat >"$HOME/.clickhouse-client/config.xml" && exec clickhouse-client --host "$1" --port "$2" --database "$3" --multiquery --query "$4"',
    "sh",
    url.hostname,
    url.port,
    decodeURIComponent(url.pathname.slice(1)),
    statement,
  ],
  input: `<config><user>${xml(decodeURIComponent(url.username))}</user><password>${xml(decodeURIComponent(url.password))}</password></config>\n`,
});

const CASES: EngineCase[] = [
  {
    engine: "postgresql",
    image: "capstan-test/postgres:latest",
    body: { postgres_user: "app", postgres_db: "appdb" },
    database: "appdb",
    client: (url, statement) => ({ image: "capstan-test/postgres:latest", argv: ["psql", url.toString(), "-v", "ON_ERROR_STOP=1", "-tA", "-c", statement] }),
    write: ["CREATE TABLE notes (id int primary key, body text)", "INSERT INTO notes SELECT g, 'note ' || g FROM generate_series(1, 500) g"],
    read: "SELECT count(*) || ':' || max(body) FROM notes",
    drop: "DROP TABLE notes",
    expect: /^500:note 99$/m,
  },
  {
    engine: "mariadb",
    image: "capstan-test/mariadb:latest",
    body: { mariadb_user: "app", mariadb_database: "appdb" },
    database: "appdb",
    client: mysqlClient("mariadb"),
    write: ["CREATE TABLE notes (id int primary key, body text)", "INSERT INTO notes VALUES (1, 'first'), (2, 'second'), (3, 'third')"],
    read: "SELECT CONCAT(COUNT(*), ':', MAX(body)) FROM notes",
    drop: "DROP TABLE notes",
    expect: /^3:third$/m,
  },
  {
    // Debian has no MySQL: the mysql create path (MYSQL_* env, mysqldump) runs on MariaDB here.
    engine: "mysql",
    image: "capstan-test/mariadb:latest",
    body: { mysql_user: "app", mysql_database: "appdb" },
    database: "appdb",
    client: mysqlClient("mysql"),
    write: ["CREATE TABLE notes (id int primary key, body text)", "INSERT INTO notes VALUES (1, 'alpha'), (2, 'beta')"],
    read: "SELECT CONCAT(COUNT(*), ':', MAX(body)) FROM notes",
    drop: "DROP TABLE notes",
    expect: /^2:beta$/m,
  },
  {
    engine: "redis",
    image: "capstan-test/redis:latest",
    body: {},
    client: redisClient,
    write: ["SET greeting hello-redis", "RPUSH queue a b c"],
    read: "MGET greeting missing",
    drop: "FLUSHALL",
    expect: /hello-redis/,
  },
  {
    // A Redis 7 stand-in under KeyDB's names (KeyDB is not in Debian): the keydb path's
    // container spec, health check, backup and restore, on a real Redis-protocol server.
    engine: "keydb",
    image: "capstan-test/keydb-standin:latest",
    body: {},
    client: redisClient,
    write: ["SET greeting hello-keydb"],
    read: "GET greeting",
    drop: "FLUSHALL",
    expect: /hello-keydb/,
  },
  {
    // Likewise a Redis 7 stand-in for Dragonfly (not in Debian).
    engine: "dragonfly",
    image: "capstan-test/dragonfly-standin:latest",
    body: {},
    client: redisClient,
    write: ["SET greeting hello-dragonfly"],
    read: "GET greeting",
    drop: "FLUSHALL",
    expect: /hello-dragonfly/,
  },
  {
    // ClickHouse 18.16 from Debian: the clickhouse path with the engine's own dump and restore,
    // on a database of its own (clickhouse_db): the image creates it at first start, the backup
    // dumps it and the restore puts the rows back there. The statements name it, so rows that
    // landed in `default` would not count; the read also shows `default` has no such table.
    engine: "clickhouse",
    image: "capstan-test/clickhouse:latest",
    body: { clickhouse_admin_user: "app", clickhouse_db: "analytics" },
    database: "analytics",
    client: clickhouseClient,
    write: [
      "CREATE TABLE analytics.notes (id UInt32, body String) ENGINE = MergeTree ORDER BY id",
      "INSERT INTO analytics.notes VALUES (1, 'one'), (2, 'two'), (3, 'three')",
    ],
    read: "SELECT concat(toString(count()), ':', max(body), ':', toString((SELECT count() FROM system.tables WHERE database = 'default' AND name = 'notes'))) FROM analytics.notes",
    drop: "DROP TABLE analytics.notes",
    expect: /^3:two:0$/m,
  },
];

// ---------------------------------------------------------------------------------------------

async function networkOf(container: string): Promise<string> {
  const out = await sh("docker", ["inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", container]);
  const name = out.trim().split(" ")[0];
  if (!name) throw new Error(`${container} is on no network`);
  return name;
}

/** Runs one statement from a throwaway client container on the database's network. */
async function run(c: EngineCase, dbUuid: string, url: URL, statement: string): Promise<string> {
  const { image, argv, input } = c.client(url, statement);
  const interactive = input === undefined ? [] : ["-i"];
  return sh("docker", ["run", "--rm", ...interactive, "--label", "capstan.test=1", "--network", await networkOf(dbUuid), "--entrypoint", argv[0]!, image, ...argv.slice(1)], {
    timeoutMs: 60_000,
    ...(input === undefined ? {} : { input }),
  });
}

async function database(uuid: string): Promise<Record<string, any>> {
  const res = await team.api.get(`/databases/${uuid}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

const healthy = (uuid: string) =>
  until(`database ${uuid} to be running:healthy`, async () => ((await database(uuid)).status === "running:healthy" ? true : false), TIMEOUT_S * 1000, 500);

async function execution(db: string, schedule: string, uuid: string): Promise<Record<string, any>> {
  const res = await team.api.get(`/databases/${db}/backups/${schedule}/executions`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const found = (res.body.data as Record<string, any>[]).find((e) => e.uuid === uuid);
  if (!found) throw new Error(`execution ${uuid} is not listed`);
  return found;
}

async function backedUp(db: string, schedule: string): Promise<Record<string, any>> {
  const res = await team.api.post(`/databases/${db}/backups/${schedule}/execute`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const uuid = res.body.execution_uuid as string;
  const done = await until(
    `backup ${uuid} to end`,
    async () => {
      const e = await execution(db, schedule, uuid);
      return e.status === "success" || e.status === "failed" ? e : false;
    },
    TIMEOUT_S * 1000,
    500,
  );
  expect(done.status, `backup failed: ${done.reason}`).toBe("success");
  return done;
}

async function restored(db: string, schedule: string, exec: string): Promise<void> {
  const res = await team.api.post(`/databases/${db}/backups/${schedule}/executions/${exec}/restore`, {});
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const done = await until(
    `restore of ${exec} to end`,
    async () => {
      const e = await execution(db, schedule, exec);
      return e.restore_status === "success" || e.restore_status === "failed" ? e : false;
    },
    TIMEOUT_S * 1000,
    500,
  );
  expect(done.restore_status, `restore failed: ${done.restore_reason}`).toBe("success");
}

/**
 * Speaks RESP on the host's public port: AUTH then PING. Resolves with what the server answered,
 * or null when nothing accepts the connection (the port is closed). Bounded to 3 s.
 */
function pingPublic(port: number, password: string): Promise<string | null> {
  return new Promise((resolve) => {
    const sock = connect({ host: "127.0.0.1", port });
    let answer = "";
    const done = (v: string | null) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(answer || null), 3_000);
    const arg = (v: string) => `$${Buffer.byteLength(v)}\r\n${v}\r\n`;
    sock.on("connect", () => sock.write(`*3\r\n${arg("AUTH")}${arg("default")}${arg(password)}*1\r\n${arg("PING")}`));
    sock.on("data", (d) => {
      answer += d.toString("utf8");
      if (answer.includes("PONG") || answer.includes("-")) done(answer);
    });
    sock.on("error", () => done(null));
    sock.on("close", () => done(answer || null));
  });
}

// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  s3 = await startS3Server({ buckets: [`capstan-e2e-${RUN}`] });
  const port = await freePort();
  t = await startTestInstance(
    { PLATFORM_PUBLIC_URL: `http://127.0.0.1:${port}`, PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true", PLATFORM_DEPLOY_TIMEOUT_S: String(TIMEOUT_S) },
    { host: "127.0.0.1", port },
  );
  team = await t.newTeam();
  const local = await registerLocalServer(team, keys, "capstan-e2e-dbagent-");
  ({ server, stateDir } = local);
  agent = spawnLocalAgent({ url: `http://127.0.0.1:${port}`, token: local.agentToken, stateDir });
  await until("the agent to connect", async () => (await team.api.get(`/servers/${server.uuid}`)).body.status === "reachable", 60_000);
  project = (await team.api.post("/projects", { name: `db-e2e-${RUN}` })).body.uuid;

  const storage = async (name: string, extra: Record<string, unknown>) => {
    const res = await team.api.post("/s3-storages", {
      name,
      endpoint: s3.endpoint,
      region: "us-east-1",
      bucket: s3.bucket,
      path_prefix: `${name}/`,
      path_style: true,
      access_key: s3.accessKey,
      secret_key: s3.secretKey,
      ...extra,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const tested = await team.api.post(`/s3-storages/${res.body.data.id}/test`);
    expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    return res.body.data.id as number;
  };
  plainStorage = await storage("plain", {});
  sealedStorage = await storage("sealed", { encryption_passphrase: PASSPHRASE });
}, 600_000);

afterAll(async () => {
  await stopLocalAgent(agent);
  await t?.close();
  await s3?.stop();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
  keys.cleanup();
});

describe.each(CASES)("$engine through the API on a real engine", (c) => {
  it(
    "create, connect with internal_db_url, write, back up to S3 (plain and encrypted), drop, restore: the rows are back",
    async () => {
      const created = await team.api.post(`/databases/${c.engine}`, {
        project_uuid: project,
        environment_name: "production",
        server_uuid: server.uuid,
        destination_uuid: server.destination,
        name: `${c.engine}-e2e`,
        image: c.image,
        ...c.body,
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect(created.body.type).toBe(`standalone-${c.engine}`);
      const db = created.body.uuid as string;
      const url = new URL(created.body.internal_db_url as string);
      expect(url.hostname).toBe(db);
      if (c.database) expect(decodeURIComponent(url.pathname.slice(1))).toBe(c.database);
      await healthy(db);
      expect((await database(db)).last_error).toBeNull();
      // The server's resources give it the spec's type (from its record), its status confirmed by the engine now.
      const resources = await team.api.get(`/servers/${server.uuid}/resources`, { per_page: 100 });
      expect(resources.body.data).toContainEqual(expect.objectContaining({ uuid: db, name: `${c.engine}-e2e`, type: `standalone-${c.engine}`, status: "running:healthy", stale: false }));

      for (const statement of c.write) await run(c, db, url, statement);
      expect(await run(c, db, url, c.read)).toMatch(c.expect);

      // Plain backup to S3; the object is gzip.
      const plain = await team.api.post(`/databases/${db}/backups`, { frequency: "0 3 * * *", s3_storage_id: plainStorage, number_of_backups_locally: 1 });
      expect(plain.status, JSON.stringify(plain.body)).toBe(201);
      const plainSchedule = plain.body.data.uuid as string;
      const first = await backedUp(db, plainSchedule);
      expect(first.is_encrypted).toBe(false);
      expect(first.size).toBeGreaterThan(0);
      const plainObject = await s3.read(first.s3_key);
      expect(plainObject.subarray(0, 2).toString("hex")).toBe("1f8b");
      expect(plainObject.length).toBe(first.size);

      // Encrypted backup: the object is an OpenPGP message (not gzip, not plain text).
      const sealed = await team.api.post(`/databases/${db}/backups`, { frequency: "@daily", s3_storage_id: sealedStorage, number_of_backups_locally: 0 });
      expect(sealed.status, JSON.stringify(sealed.body)).toBe(201);
      const sealedSchedule = sealed.body.data.uuid as string;
      const second = await backedUp(db, sealedSchedule);
      expect(second.is_encrypted).toBe(true);
      expect(second.stored_locally).toBe(false);
      const sealedObject = await s3.read(second.s3_key);
      // A new-format packet header (bit 7 and 6 set) opening with a symmetric-key session key packet (tag 3).
      expect(sealedObject[0]).toBe(0xc3);
      expect(sealedObject.subarray(0, 2).toString("hex")).not.toBe("1f8b");

      // Drop, restore the plain backup (from the server's local copy), rows are back.
      await run(c, db, url, c.drop);
      expect(await run(c, db, url, c.read).catch((e: Error) => e.message)).not.toMatch(c.expect);
      await restored(db, plainSchedule, first.uuid);
      await healthy(db);
      expect(await run(c, db, url, c.read)).toMatch(c.expect);

      // Drop again, restore the encrypted one (only in S3: downloaded and decrypted), rows are back.
      await run(c, db, url, c.drop);
      await restored(db, sealedSchedule, second.uuid);
      await healthy(db);
      expect(await run(c, db, url, c.read)).toMatch(c.expect);

      const removed = await team.api.delete(`/databases/${db}?delete_volumes=true&docker_cleanup=false`);
      expect(removed.status, JSON.stringify(removed.body)).toBe(200);
      await until("the database container to be gone", async () => (await sh("docker", ["ps", "-aq", "--filter", `name=^${db}$`])).trim() === "", 60_000);
    },
    TIMEOUT_S * 4 * 1000,
  );
});

describe("a database's lifecycle through the API on a real engine", () => {
  it("public port opens and really closes; stop, start, restart follow the engine; variables reach the container on restart; logs; delete", async () => {
    const created = await team.api.post("/databases/redis", {
      project_uuid: project,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destination,
      name: "redis-lifecycle",
      image: "capstan-test/redis:latest",
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const db = created.body.uuid as string;
    const password = decodeURIComponent(new URL(created.body.internal_db_url as string).password);
    await healthy(db);
    const port = await freePort();
    expect(await pingPublic(port, password)).toBeNull();

    // Open: the engine answers on the server's port (loopback here), with its password.
    const opened = await team.api.patch(`/databases/${db}`, { is_public: true, public_port: port });
    expect(opened.status, JSON.stringify(opened.body)).toBe(200);
    expect(opened.body.data.external_db_url).toContain(`:${port}/`);
    await healthy(db);
    expect(await until("the public port to answer", async () => (await pingPublic(port, password))?.includes("+PONG") ?? false, 30_000, 250)).toBe(true);
    expect(await pingPublic(port, "wrong-password")).toMatch(/WRONGPASS|invalid/);

    // Closed: nothing accepts connections on the port any more.
    const closed = await team.api.patch(`/databases/${db}`, { is_public: false });
    expect(closed.status, JSON.stringify(closed.body)).toBe(200);
    expect(closed.body.data.external_db_url).toBeNull();
    await healthy(db);
    await until("the public port to close", async () => (await pingPublic(port, password)) === null, 30_000, 250);

    // Stop and start as the engine sees them.
    const stopped = await team.api.post(`/databases/${db}/stop`);
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(200);
    expect(stopped.body.status).toMatch(/^exited/);
    expect((await sh("docker", ["inspect", "-f", "{{.State.Running}}", db])).trim()).toBe("false");
    expect((await database(db)).status).toMatch(/^exited/);
    const started = await team.api.post(`/databases/${db}/start`);
    expect([200, 202], JSON.stringify(started.body)).toContain(started.status);
    await healthy(db);
    expect((await sh("docker", ["inspect", "-f", "{{.State.Running}}", db])).trim()).toBe("true");

    // A variable is passed to the container when it is next created: restart recreates it.
    const env = await team.api.post(`/databases/${db}/envs`, { key: "LIFECYCLE_MARK", value: `mark-${RUN}` });
    expect(env.status, JSON.stringify(env.body)).toBe(201);
    expect(await sh("docker", ["inspect", "-f", "{{json .Config.Env}}", db])).not.toContain(`mark-${RUN}`);
    const restarted = await team.api.post(`/databases/${db}/restart`);
    expect([200, 202], JSON.stringify(restarted.body)).toContain(restarted.status);
    await healthy(db);
    expect(await sh("docker", ["inspect", "-f", "{{json .Config.Env}}", db])).toContain(`LIFECYCLE_MARK=mark-${RUN}`);

    // Logs come from the engine's container.
    const logs = await team.api.get(`/databases/${db}/logs`, { since: 0, tail: 200 });
    expect(logs.status, JSON.stringify(logs.body)).toBe(200);
    expect(logs.body.logs).toMatch(/Ready to accept connections/);

    const volume = `capstan-db-${db}`;
    expect(await sh("docker", ["volume", "ls", "-q", "--filter", `name=^${volume}$`])).toBe(volume);
    const removed = await team.api.delete(`/databases/${db}?delete_volumes=true&docker_cleanup=false`);
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    await until("the database container to be gone", async () => (await sh("docker", ["ps", "-aq", "--filter", `name=^${db}$`])).trim() === "", 60_000);
    await until("its volume to be gone", async () => (await sh("docker", ["volume", "ls", "-q", "--filter", `name=^${volume}$`])) === "", 30_000);
  }, TIMEOUT_S * 2 * 1000);
});
