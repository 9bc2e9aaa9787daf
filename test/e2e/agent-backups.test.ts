import { randomBytes, randomUUID } from "node:crypto";
import { appendFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseEngine, DbBackupPayload, DbBackupResult, DbCredentials, DbRestorePayload, S3Target } from "@capstan/shared";
import { encryptStream } from "../../agent/src/backup/crypto.js";
import { DRIVERS } from "../../agent/src/backup/engines/index.js";
import { redisCliInput } from "../../agent/src/databases/redis-cli.js";
import { runRestore } from "../../agent/src/backup/restore.js";
import type { ExecSpec } from "../../agent/src/docker/engine.js";
import { DockerodeEngine } from "../../agent/src/docker/dockerode-engine.js";
import type { JobContext } from "../../agent/src/dispatch/types.js";
import { createHandlers } from "../../agent/src/handlers/index.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";
import { removeLabelled, sh, until } from "./support/kit.js";

/**
 * db.backup / db.restore / backup.delete on the real local engine, with the database test images
 * of test/kit/images.sh (deployed by the agent's own db.deploy) and a real S3-compatible server
 * (s3rver behind a SigV4-checking front, test/support/s3-server.ts). The handlers run in this
 * process, as a host-process agent would run them.
 *
 * Engines: postgresql (PostgreSQL 15), mysql (MariaDB 10.11 under the mysql* tool names: Debian
 * has no MySQL), mariadb (MariaDB 10.11), redis (Redis 7), clickhouse (ClickHouse 18.16).
 * keydb and dragonfly run on STAND-INS (Redis 7 behind KeyDB's / Dragonfly's image layout): they
 * exercise the agent's keydb / dragonfly code paths, not those engines. mongodb is not tested:
 * neither MongoDB nor its database tools are in Debian's archive.
 */
const RUN = randomBytes(4).toString("hex");
const NET = `capstan-test-bk-${RUN}`;
const LABELS = { "capstan.test": "1", "capstan.test.run": RUN };

const engine = new DockerodeEngine();
/** Every exec the handlers ask the engine for: no password may be in its argv or environment. */
const execs: { container: string; cmd: string[]; env: Record<string, string> }[] = [];
const recording = new Proxy(engine, {
  get(target, prop) {
    if (prop === "execStream") {
      return (id: string, spec: ExecSpec, signal?: AbortSignal) => {
        execs.push({ container: id, cmd: spec.cmd, env: spec.env ?? {} });
        return target.execStream(id, spec, signal);
      };
    }
    const v = Reflect.get(target, prop, target) as unknown;
    return typeof v === "function" ? v.bind(target) : v;
  },
});
let handlers: ReturnType<typeof createHandlers>;
let stateDir: string;
let s3: S3Server;
let target: S3Target;

function job(signal: AbortSignal = AbortSignal.timeout(240_000)): JobContext & { lines: string[] } {
  const lines: string[] = [];
  return { signal, progress: (l) => void lines.push(l), job: { id: `job-${randomUUID()}`, attempt: 1 }, lines };
}

/** Characters that break naive quoting in config files, SQL and shells. */
const password = () => `pw"'\\ #$x-${randomBytes(12).toString("hex")}`;

/** A client of the engine in a throwaway container on the test network; secrets via the environment. */
function client(image: string, argv: string[], opts: { secretEnv?: Record<string, string>; input?: string; entrypoint?: string } = {}): Promise<string> {
  const args = ["run", "--rm", "-i", "--label", "capstan.test=1", "--label", `capstan.test.run=${RUN}`, "--network", NET];
  for (const k of Object.keys(opts.secretEnv ?? {})) args.push("-e", k);
  if (opts.entrypoint) args.push("--entrypoint", opts.entrypoint);
  args.push(image, ...argv);
  return sh("docker", args, { env: opts.secretEnv ?? {}, input: opts.input ?? "", timeoutMs: 60_000 });
}

interface Case {
  engine: DatabaseEngine;
  image: string;
  what: string;
  ext: string;
  credentials: () => DbCredentials;
  /** Adds rows / list items. */
  write(uuid: string, c: DbCredentials, values: string[]): Promise<void>;
  /** The values, sorted, joined by ",". */
  read(uuid: string, c: DbCredentials): Promise<string>;
  /** Destroys the data the test wrote (and adds something a restore must remove or replace). */
  drop(uuid: string, c: DbCredentials): Promise<void>;
  /** Credentials the engine refuses, and the reason the failed backup must give. */
  bad?: { credentials: (c: DbCredentials) => DbCredentials; reason: RegExp };
}

const sqlCase = (engineName: "mysql" | "mariadb", cli: string, what: string): Case => {
  const run = (uuid: string, c: DbCredentials, query: string) =>
    client("capstan-test/mariadb", [cli, `--host=${uuid}`, `--user=${c.user}`, "--batch", "--skip-column-names", `--execute=${query}`, c.database!], {
      secretEnv: { MYSQL_PWD: c.password },
    });
  return {
    engine: engineName,
    image: "capstan-test/mariadb",
    what,
    ext: "sql.gz",
    credentials: () => ({ user: "app", password: password(), database: "appdb", root_password: password() }),
    write: async (u, c, vs) => void (await run(u, c, `CREATE TABLE IF NOT EXISTS t (v VARCHAR(64)); INSERT INTO t VALUES ${vs.map((v) => `('${v}')`).join(",")};`)),
    read: (u, c) => run(u, c, "SELECT COALESCE(GROUP_CONCAT(v ORDER BY v), '') FROM t;"),
    drop: async (u, c) => void (await run(u, c, "DROP TABLE t; CREATE TABLE t (v VARCHAR(64)); INSERT INTO t VALUES ('after-drop');")),
    bad: { credentials: (c) => ({ ...c, root_password: "wrong-root-password" }), reason: new RegExp(`${engineName === "mysql" ? "mysqldump" : "mariadb-dump"} failed \\(exit code 2\\): .*Access denied for user 'root'`) },
  };
};

const redisCase = (engineName: "redis" | "keydb" | "dragonfly", image: string, cli: string, what: string): Case => {
  const run = (uuid: string, c: DbCredentials, ...cmd: string[]) => client(image, [cli, "-h", uuid, "-p", "6379", ...cmd], { secretEnv: { REDISCLI_AUTH: c.password } });
  return {
    engine: engineName,
    image,
    what,
    ext: "rdb.gz",
    credentials: () => ({ user: null, password: password(), database: null, root_password: null }),
    write: async (u, c, vs) => {
      expect(await run(u, c, "RPUSH", "t", ...vs)).toMatch(/^\d+$/);
    },
    read: async (u, c) => (await run(u, c, "LRANGE", "t", "0", "-1")).split("\n").filter(Boolean).sort().join(","),
    drop: async (u, c) => {
      expect(await run(u, c, "FLUSHALL")).toBe("OK");
      await run(u, c, "RPUSH", "t", "after-drop");
    },
    bad: { credentials: (c) => ({ ...c, password: "wrong-password" }), reason: new RegExp(`${cli} CONFIG: AUTH failed: (WRONGPASS|ERR invalid password)`) },
  };
};

const xml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");
const clickhouseRun = (uuid: string, c: DbCredentials, query: string) =>
  client(
    "capstan-test/clickhouse",
    ["-c", 'mkdir -p "$HOME/.clickhouse-client" && cat >"$HOME/.clickhouse-client/config.xml" && exec clickhouse-client --host "$1" --multiquery --query "$2"', "sh", uuid, query],
    { entrypoint: "sh", input: `<config><user>${xml(c.user!)}</user><password>${xml(c.password)}</password></config>\n` },
  );

const CASES: Case[] = [
  {
    engine: "postgresql",
    image: "capstan-test/postgres",
    what: "PostgreSQL 15",
    ext: "sql.gz",
    credentials: () => ({ user: "app", password: password(), database: "appdb", root_password: null }),
    ...(() => {
      const run = (uuid: string, c: DbCredentials, query: string) =>
        client("capstan-test/postgres", ["psql", `postgresql://${c.user}@${uuid}:5432/${c.database}`, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", query], {
          secretEnv: { PGPASSWORD: c.password },
        });
      return {
        write: async (u: string, c: DbCredentials, vs: string[]) =>
          void (await run(u, c, `CREATE TABLE IF NOT EXISTS t (v text); INSERT INTO t VALUES ${vs.map((v) => `('${v}')`).join(",")};`)),
        read: (u: string, c: DbCredentials) => run(u, c, "SELECT coalesce(string_agg(v, ',' ORDER BY v), '') FROM t;"),
        drop: async (u: string, c: DbCredentials) => void (await run(u, c, "DROP TABLE t; CREATE TABLE t (v text); INSERT INTO t VALUES ('after-drop');")),
      };
    })(),
  },
  sqlCase("mysql", "mysql", "MariaDB 10.11 under the mysql / mysqldump names (Debian has no MySQL)"),
  sqlCase("mariadb", "mariadb", "MariaDB 10.11"),
  redisCase("redis", "capstan-test/redis", "redis-cli", "Redis 7"),
  redisCase("keydb", "capstan-test/keydb-standin", "keydb-cli", "STAND-IN for KeyDB: Redis 7 under keydb-server / keydb-cli"),
  redisCase("dragonfly", "capstan-test/dragonfly-standin", "redis-cli", "STAND-IN for Dragonfly: Redis 7 configured from DFLY_* variables"),
  {
    engine: "clickhouse",
    image: "capstan-test/clickhouse",
    what: "ClickHouse 18.16",
    ext: "native.tar.gz",
    credentials: () => ({ user: "admin", password: password(), database: "appdb", root_password: null }),
    write: async (u, c, vs) =>
      void (await clickhouseRun(u, c, `CREATE TABLE IF NOT EXISTS ${c.database}.t (v String) ENGINE = MergeTree ORDER BY v; INSERT INTO ${c.database}.t VALUES ${vs.map((v) => `('${v}')`).join(",")}`)),
    read: (u, c) => clickhouseRun(u, c, `SELECT arrayStringConcat(groupArray(v), ',') FROM (SELECT v FROM ${c.database}.t ORDER BY v)`),
    drop: async (u, c) =>
      void (await clickhouseRun(u, c, `DROP TABLE ${c.database}.t; CREATE TABLE ${c.database}.t (v String) ENGINE = MergeTree ORDER BY v; INSERT INTO ${c.database}.t VALUES ('after-drop')`)),
  },
];

/** A database of engine `k` with `rows` in it, deployed before the enclosing describe's tests. */
function databaseWithRows(k: Case, rows: string[]): { uuid: string; creds: DbCredentials } {
  const uuid = randomUUID();
  const creds = k.credentials();
  beforeAll(async () => {
    await deploy(k, uuid, creds);
    await k.write(uuid, creds, rows);
  }, 240_000);
  return { uuid, creds };
}

async function deploy(k: Case, uuid: string, credentials: DbCredentials): Promise<void> {
  const res = await handlers["db.deploy"](
    {
      db: { uuid, name: `bk ${k.engine}` },
      engine: k.engine,
      image: k.image,
      credentials,
      env: {},
      network: NET,
      networks: [],
      ensure_networks: [],
      public_port: null,
      memory: "1g",
      cpus: "1",
    },
    job(),
  );
  expect(res.status).toBe("running:healthy");
}

let clock = Date.UTC(2030, 0, 1);
/** The control plane's file name, with a later time stamp on each call. */
function filename(k: Pick<Case, "engine" | "ext">, encrypted: boolean): { filename: string; execution: string } {
  clock += 60_000;
  const stamp = new Date(clock).toISOString().replace(/[-:]/g, "").replace(/\.\d{3}Z$/, "Z");
  const execution = randomUUID();
  return { execution, filename: `${k.engine}-${stamp}-${execution.slice(0, 8)}.${k.ext}${encrypted ? ".gpg" : ""}` };
}

function backupPayload(
  k: Case,
  uuid: string,
  credentials: DbCredentials,
  opts: { schedule?: string; passphrase?: string | null; s3?: boolean; keepLocally?: number; keepRemote?: number | null; prefix?: string } = {},
): DbBackupPayload {
  const passphrase = opts.passphrase ?? null;
  const { filename: name, execution } = filename(k, passphrase !== null);
  return {
    db: { uuid, name: `bk ${k.engine}` },
    engine: k.engine,
    credentials,
    schedule_uuid: opts.schedule ?? "schedule-1",
    execution_uuid: execution,
    filename: name,
    keep_locally: opts.keepLocally ?? 5,
    s3: opts.s3 === false ? null : { target, prefix: opts.prefix ?? `backups/${uuid}/`, keep_remote: opts.keepRemote ?? null },
    passphrase,
  };
}

function restorePayload(k: Case, uuid: string, credentials: DbCredentials, from: DbRestorePayload["from"], passphrase: string | null): DbRestorePayload {
  return { db: { uuid, name: `bk ${k.engine}` }, engine: k.engine, credentials, from, passphrase };
}

const isGzip = (b: Buffer) => b[0] === 0x1f && b[1] === 0x8b;
/** An OpenPGP packet header in the new format (RFC 9580 4.2.1): tag 3 is the passphrase-protected session key. */
const openPgpTag = (b: Buffer) => ((b[0]! & 0xc0) === 0xc0 ? b[0]! & 0x3f : null);

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "capstan-agent-state-"));
  s3 = await startS3Server({ buckets: ["capstan-backups"] });
  target = { endpoint: s3.endpoint, region: "us-east-1", bucket: s3.bucket, path_style: true, access_key: s3.accessKey, secret_key: s3.secretKey, allow_private: true };
  await engine.createNetwork({ name: NET, driver: "bridge", labels: { ...LABELS, "capstan.managed": "true" } });
  handlers = createHandlers(recording, { extraLabels: LABELS, stateDir, db: { pollMs: 100, stopTimeoutS: 10 } });
}, 120_000);

afterAll(async () => {
  await removeLabelled(RUN);
  await sh("docker", ["network", "rm", NET]).catch(() => {});
  await s3?.stop();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
}, 120_000);

describe.each(CASES)("backup and restore: $engine ($what)", (k) => {
  it("backs up to S3 plain and encrypted, restores from the local file and from S3, refuses a wrong passphrase", async () => {
    const uuid = randomUUID();
    const creds = k.credentials();
    await deploy(k, uuid, creds);
    await k.write(uuid, creds, ["a", "b"]);
    expect(await k.read(uuid, creds)).toBe("a,b");

    // Plain: gzip, on the server (mode 600 in a 700 directory) and in S3, byte for byte.
    const plainJob = job();
    const plainPayload = backupPayload(k, uuid, creds);
    const plain = await handlers["db.backup"](plainPayload, plainJob);
    const localPlain = join(stateDir, "backups", uuid, "schedule-1", plainPayload.filename);
    expect(plain).toEqual({
      filename: plainPayload.filename,
      size: expect.any(Number),
      is_encrypted: false,
      local_path: localPlain,
      s3_key: `backups/${uuid}/${plainPayload.filename}`,
      removed_local: [],
      removed_remote: [],
    });
    expect(((await stat(localPlain)).mode & 0o777).toString(8)).toBe("600");
    expect(((await stat(join(stateDir, "backups", uuid, "schedule-1"))).mode & 0o777).toString(8)).toBe("700");
    const plainObject = await s3.read(plain.s3_key!);
    expect(plainObject.length).toBe(plain.size);
    expect(plainObject.equals(await readFile(localPlain))).toBe(true);
    expect(isGzip(plainObject)).toBe(true);
    expect(plainJob.lines.join("\n")).not.toContain(creds.password);

    // Encrypted: an OpenPGP message (session key packet first), not gzip.
    const passphrase = `pass ${randomBytes(8).toString("hex")}`;
    const encPayload = backupPayload(k, uuid, creds, { passphrase });
    const enc = await handlers["db.backup"](encPayload, job());
    expect(enc.is_encrypted).toBe(true);
    const encObject = await s3.read(enc.s3_key!);
    expect(isGzip(encObject)).toBe(false);
    expect(openPgpTag(encObject)).toBe(3);
    expect(encObject.includes(Buffer.from(creds.password))).toBe(false);

    // Data changes after the backups, then the restore from the local encrypted file.
    await k.drop(uuid, creds);
    expect(await k.read(uuid, creds)).toBe("after-drop");
    const r1 = await handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: enc.local_path, s3: { target, key: enc.s3_key! } }, passphrase), job());
    expect(r1.bytes).toBeGreaterThan(0);
    expect(await k.read(uuid, creds)).toBe("a,b");

    // A wrong passphrase fails before the database is touched.
    await k.drop(uuid, creds);
    await expect(handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: enc.local_path, s3: null }, "not the passphrase"), job())).rejects.toThrow(/wrong passphrase/);
    expect(await k.read(uuid, creds)).toBe("after-drop");

    // Refused credentials: the backup fails with the engine's reason and stores nothing.
    if (k.bad) {
      const before = await s3.objects(`backups/${uuid}/`);
      const p = backupPayload(k, uuid, k.bad.credentials(creds), { schedule: "schedule-bad" });
      await expect(handlers["db.backup"](p, job())).rejects.toThrow(k.bad.reason);
      expect(await s3.objects(`backups/${uuid}/`)).toEqual(before);
      expect(await readdir(join(stateDir, "backups", uuid, "schedule-bad"))).toEqual([]);
    }

    // The plain backup from S3 once its local file is gone.
    await unlink(localPlain);
    const fromS3 = job();
    await handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: localPlain, s3: { target, key: plain.s3_key! } }, null), fromS3);
    expect(fromS3.lines.join("\n")).toMatch(/restoring from S3 object/);
    expect(await k.read(uuid, creds)).toBe("a,b");

    // The tools got the password from stdin or a 600 file, never argv or their environment, and
    // no such file is left in the container.
    const id = (await engine.inspectContainer(uuid))!.id;
    const tools = execs.filter((e) => e.container === id);
    expect(tools.length).toBeGreaterThan(0);
    for (const e of tools) {
      for (const secret of [creds.password, creds.root_password].filter((x): x is string => !!x)) {
        expect(e.cmd.join("\n")).not.toContain(secret);
        expect(Object.values(e.env).join("\n")).not.toContain(secret);
      }
      for (const name of ["PGPASSWORD", "MYSQL_PWD", "REDISCLI_AUTH", "CLICKHOUSE_PASSWORD"]) expect(e.env).not.toHaveProperty(name);
    }
    await until("no secret file left in the container", async () => !/capstan-/.test(await sh("docker", ["exec", uuid, "ls", "-a", "/tmp"])), 30_000, 200);
  });
});

describe("backups of postgresql: failures, retention, deletion", () => {
  const k = CASES[0]!;
  const { uuid, creds } = databaseWithRows(k, ["x"]);

  it("a failing dump fails with the tool's reason, uploads nothing and leaves no file", async () => {
    const schedule = "schedule-fail";
    const bad = { ...creds, user: "nobody" };
    const p = backupPayload(k, uuid, bad, { schedule, prefix: `fail/${uuid}/` });
    await expect(handlers["db.backup"](p, job())).rejects.toThrow(/pg_dump failed \(exit code 1\): .*role "nobody" does not exist/);
    expect(await s3.objects(`fail/${uuid}/`)).toEqual([]);
    expect(await readdir(join(stateDir, "backups", uuid, schedule))).toEqual([]);
  });

  it("an unreachable S3 endpoint fails the backup and removes the local file", async () => {
    const schedule = "schedule-s3-down";
    const p = backupPayload(k, uuid, creds, { schedule });
    p.s3 = { ...p.s3!, target: { ...target, allow_private: false } };
    await expect(handlers["db.backup"](p, job())).rejects.toThrow(/loopback address; .* refused/);
    expect(await readdir(join(stateDir, "backups", uuid, schedule))).toEqual([]);
  });

  it("keeps the newest keep_locally files and keep_remote objects, and says which went", async () => {
    const schedule = "schedule-retention";
    const prefix = `ret/${uuid}/`;
    // Something that is not a backup under the prefix: retention never touches it.
    await handlers["db.backup"]({ ...backupPayload(k, uuid, creds, { schedule, prefix: `ret-other/${uuid}/` }) }, job());
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule, prefix, keepLocally: 2, keepRemote: 2 }), job()));
    const [first, second, third] = results;
    expect(third!.removed_local).toEqual([first!.local_path]);
    expect(third!.removed_remote).toEqual([first!.s3_key]);
    expect((await readdir(join(stateDir, "backups", uuid, schedule))).sort()).toEqual([second!.filename, third!.filename].sort());
    expect((await s3.objects(prefix)).map((o) => o.key)).toEqual([second!.s3_key, third!.s3_key].sort());

    // keep_locally 0 with S3: the file goes once uploaded.
    const zero = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule, prefix, keepLocally: 0, keepRemote: 2 }), job());
    expect(zero.local_path).toBeNull();
    expect(zero.removed_local.sort()).toEqual([second!.local_path, third!.local_path].sort());
    expect(await readdir(join(stateDir, "backups", uuid, schedule))).toEqual([]);
    expect((await s3.objects(prefix)).map((o) => o.key)).toEqual([third!.s3_key, zero.s3_key].sort());

    // keep_locally 0 without S3: the only copy stays.
    const localOnly = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule: "schedule-local", s3: false, keepLocally: 0 }), job());
    expect(localOnly.s3_key).toBeNull();
    expect(localOnly.local_path).not.toBeNull();
    expect((await stat(localOnly.local_path!)).size).toBe(localOnly.size);
  });

  it("backup.delete removes the file and the object; paths outside the backups dir are refused", async () => {
    const r = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule: "schedule-del", prefix: `del/${uuid}/` }), job());
    expect(await handlers["backup.delete"]({ local_path: r.local_path, s3: { target, key: r.s3_key! } }, job())).toEqual({ local_removed: true, remote_removed: true });
    await expect(stat(r.local_path!)).rejects.toThrow(/ENOENT/);
    expect(await s3.objects(`del/${uuid}/`)).toEqual([]);
    // Again: already gone counts as removed.
    expect(await handlers["backup.delete"]({ local_path: r.local_path, s3: { target, key: r.s3_key! } }, job())).toEqual({ local_removed: true, remote_removed: true });

    const outside = join(stateDir, "not-a-backup.txt");
    await writeFile(outside, "keep me");
    await expect(handlers["backup.delete"]({ local_path: outside, s3: null }, job())).rejects.toThrow(/outside .*backups\/; refused/);
    await expect(handlers["backup.delete"]({ local_path: `${stateDir}/backups/../not-a-backup.txt`, s3: null }, job())).rejects.toThrow(/refused/);
    // A symlink inside the backups dir that leads out of it.
    await mkdir(join(stateDir, "backups", uuid), { recursive: true });
    await sh("ln", ["-s", outside, join(stateDir, "backups", uuid, "link.sql.gz")]);
    await expect(handlers["backup.delete"]({ local_path: join(stateDir, "backups", uuid, "link.sql.gz"), s3: null }, job())).rejects.toThrow(/leads outside/);
    expect(await readFile(outside, "utf8")).toBe("keep me");
    await expect(handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: "/etc/passwd", s3: null }, null), job())).rejects.toThrow(/outside .*refused/);
  });

  it("a backup that is not encrypted restores although a passphrase is given; an encrypted one needs it", async () => {
    const plain = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule: "schedule-mix", s3: false }), job());
    await handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: plain.local_path, s3: null }, "unused"), job());
    const enc = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule: "schedule-mix", s3: false, passphrase: "secret words" }), job());
    await expect(handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: enc.local_path, s3: null }, null), job())).rejects.toThrow(/encrypted and no passphrase/);
    expect(await k.read(uuid, creds)).toBe("x");
  });

  it("a damaged encrypted file fails the restore and psql rolls everything back", async () => {
    // Bigger than a few AEAD chunks (256 KiB each): the damage is found after data went to psql.
    await sh("docker", ["exec", "-e", "PGPASSWORD", uuid, "psql", "-h", "127.0.0.1", "-U", creds.user!, "-d", creds.database!, "-qc",
      "CREATE TABLE big AS SELECT md5(random()::text) || md5(random()::text) AS v FROM generate_series(1, 40000)"], { env: { PGPASSWORD: creds.password } });
    const enc = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule: "schedule-damage", s3: false, passphrase: "secret words" }), job());
    await k.drop(uuid, creds);
    const bytes = await readFile(enc.local_path!);
    // Flip a byte near the end: the first chunks decrypt, the last fails its authentication.
    bytes[bytes.length - 40]! ^= 0xff;
    const damaged = join(stateDir, "backups", uuid, "schedule-damage", `damaged-${enc.filename}`);
    await writeFile(damaged, bytes, { mode: 0o600 });
    await expect(handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: damaged, s3: null }, "secret words"), job())).rejects.toThrow(/reading the backup failed midway/);
    expect(await k.read(uuid, creds)).toBe("after-drop");
  });
});

describe("postgresql restores: a cancel rolls back and leaves no tool running; success needs the whole backup read", () => {
  const k = CASES[0]!;
  const { uuid, creds } = databaseWithRows(k, ["a", "b"]);
  const psql = (sql: string) =>
    sh("docker", ["exec", "-e", "PGPASSWORD", uuid, "psql", "-h", "127.0.0.1", "-U", creds.user!, "-d", creds.database!, "-v", "ON_ERROR_STOP=1", "-qAtc", sql], {
      env: { PGPASSWORD: creds.password },
    });
  /**
   * The test's session holds its lock on the table: granted, not merely asked for. LOCK TABLE
   * can itself wait a moment (for autovacuum's analyze of a freshly loaded table), and a waiting
   * holder would pass for the tool waiting behind it.
   */
  const lockHeld = (table: string) =>
    until(
      `the test's lock on ${table}`,
      async () => (await psql(`SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = '${table}' AND l.mode = 'AccessExclusiveLock' AND l.granted`)) === "1",
      30_000,
      100,
    );
  /** Client sessions other than the test's own that wait for a lock, by application name (pg_dump, psql). */
  const waitingFor = (app: string) => psql(`SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND wait_event_type = 'Lock' AND application_name = '${app}'`);
  /** Restore and dump tools still running in the database's container (the agent's psql is the one in one transaction). */
  const tools = async () => (await sh("docker", ["top", uuid, "-eo", "pid,args"])).split("\n").filter((l) => /\bpg_dump\b|\bpsql\b.*--single-transaction/.test(l));
  let big: DbBackupResult;
  const dir = () => join(stateDir, "backups", uuid, "schedule-crafted");
  /** A file in this database's backups dir (restores refuse paths outside it). */
  const crafted = async (name: string, bytes: Buffer | Uint8Array) => {
    await mkdir(dir(), { recursive: true, mode: 0o700 });
    const path = join(dir(), name);
    await writeFile(path, bytes, { mode: 0o600 });
    return path;
  };

  beforeAll(async () => {
    // Large enough that its COPY runs for a while: a cancel lands in the middle of it.
    await psql("CREATE TABLE big AS SELECT md5(g::text) || md5((g * 7)::text) AS v FROM generate_series(1, 1500000) g");
    big = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule: "schedule-big", s3: false }), job());
  }, 600_000);

  it("a cancel mid-restore rolls back (--clean's drops included) and no psql is left", async () => {
    await k.drop(uuid, creds);
    const ac = new AbortController();
    const run = job(ac.signal);
    const restoring = handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: big.local_path, s3: null }, null), run);
    restoring.catch(() => undefined);
    // Cancel while psql is loading the big table (the backup's DROPs ran already in its transaction).
    await until("psql copying into big", async () => (await psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'COPY public.big%'")) === "1", 60_000, 100);
    ac.abort(new Error("cancelled by the test"));
    await expect(restoring).rejects.toThrow(/the restore was cancelled \(cancelled by the test\); the restore tool was stopped: psql failed .*CAPSTAN RESTORE INPUT FAILED/s);
    expect(run.lines.join("\n")).toMatch(/restore cancelled: ending the restore tool's input/);
    expect(await k.read(uuid, creds)).toBe("after-drop");
    expect(await psql("SELECT count(*) FROM big")).toBe("1500000");
    expect(await tools()).toEqual([]);
  });

  it("a restore tool that cannot take its input (blocked on a lock) is stopped after the grace period, and nothing is committed", async () => {
    await k.drop(uuid, creds);
    // Another session holds t: psql blocks at the backup's DROP TABLE t and reads no more input.
    const holder = sh("docker", ["exec", "-e", "PGPASSWORD", uuid, "psql", "-h", "127.0.0.1", "-U", creds.user!, "-d", creds.database!, "-qc", "BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(20); COMMIT;"], {
      env: { PGPASSWORD: creds.password },
      timeoutMs: 60_000,
    });
    await lockHeld("t");
    const ac = new AbortController();
    const lines: string[] = [];
    const restoring = runRestore(engine, restorePayload(k, uuid, creds, { local_path: big.local_path, s3: null }, null), { stateDir, pollMs: 100, abortGraceMs: 2000 }, {
      signal: ac.signal,
      progress: (l) => void lines.push(l),
    });
    restoring.catch(() => undefined);
    await until("psql waiting for the lock", async () => (await waitingFor("psql")) === "1", 60_000, 100);
    const started = Date.now();
    ac.abort(new Error("deadline exceeded"));
    await expect(restoring).rejects.toThrow(/the restore was cancelled \(deadline exceeded\); the restore tool was stopped/);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(lines.join("\n")).toMatch(/did not exit within 2 s of the cancel: stopping it/);
    expect(await tools()).toEqual([]);
    await holder;
    expect(await k.read(uuid, creds)).toBe("after-drop");
  });

  it("a cancelled backup stops pg_dump, also one that waits for a lock and writes nothing, and leaves no file", async () => {
    const holder = sh("docker", ["exec", "-e", "PGPASSWORD", uuid, "psql", "-h", "127.0.0.1", "-U", creds.user!, "-d", creds.database!, "-qc", "BEGIN; LOCK TABLE big IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(15); COMMIT;"], {
      env: { PGPASSWORD: creds.password },
      timeoutMs: 60_000,
    });
    await lockHeld("big");
    const ac = new AbortController();
    const backingUp = handlers["db.backup"](backupPayload(k, uuid, creds, { schedule: "schedule-cancel", s3: false }), job(ac.signal));
    backingUp.catch(() => undefined);
    await until("pg_dump waiting for the lock", async () => (await waitingFor("pg_dump")) === "1", 60_000, 100);
    expect((await tools()).join("\n")).toMatch(/pg_dump/);
    ac.abort(new Error("cancelled by the test"));
    await expect(backingUp).rejects.toThrow();
    // Gone at once, not when the lock is released (Docker leaves an exec's process running).
    expect(await tools()).toEqual([]);
    expect(await readdir(join(stateDir, "backups", uuid, "schedule-cancel"))).toEqual([]);
    await holder;
  });

  it("a backup that decompresses to nothing is refused", async () => {
    const path = await crafted("postgresql-20300101T000000Z-empty000.sql.gz", gzipSync(Buffer.alloc(0)));
    await expect(handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: path, s3: null }, null), job())).rejects.toThrow(/the backup is empty/);
    expect(await k.read(uuid, creds)).toBe("after-drop");
  });

  it("a tool that exits 0 early is no success when the rest of the backup is damaged (gzip CRC, AEAD tag) or unread", async () => {
    // psql stops at \q; what follows is never read by it.
    const filler = Array.from({ length: 40_000 }, () => `-- ${randomBytes(24).toString("hex")}\n`).join("");
    const sql = Buffer.from(`SELECT 1;\n\\q\n${filler}`);

    const badCrc = gzipSync(sql);
    badCrc[badCrc.length - 8]! ^= 0xff;
    const crcPath = await crafted("postgresql-20300101T000001Z-crc00000.sql.gz", badCrc);
    await expect(handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: crcPath, s3: null }, null), job())).rejects.toThrow(
      /the backup is damaged at its end \(.*incorrect data check.*\), after the restore tool had exited successfully/,
    );

    const passphrase = "secret words";
    const chunks: Uint8Array[] = [];
    for await (const c of encryptStream(Readable.from([gzipSync(sql)]), passphrase)) chunks.push(c);
    const encrypted = Buffer.concat(chunks);
    expect(encrypted.length).toBeGreaterThan(3 * 256 * 1024);
    const truncPath = await crafted("postgresql-20300101T000002Z-trunc000.sql.gz.gpg", encrypted.subarray(0, encrypted.length - 20));
    await expect(handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: truncPath, s3: null }, passphrase), job())).rejects.toThrow(
      /the backup is damaged at its end .*after the restore tool had exited successfully/,
    );

    const intactPath = await crafted("postgresql-20300101T000003Z-intact00.sql.gz", gzipSync(sql));
    await expect(handlers["db.restore"](restorePayload(k, uuid, creds, { local_path: intactPath, s3: null }, null), job())).rejects.toThrow(
      /the restore tool exited successfully before it read the whole backup \(\d+ bytes were left\)/,
    );
    expect(await k.read(uuid, creds)).toBe("after-drop");
    expect(await tools()).toEqual([]);
  });
});

describe("redis backups and restores: failures keep their reason and the data", () => {
  const k = CASES.find((x) => x.engine === "redis")!;
  const { uuid, creds } = databaseWithRows(k, ["a", "b"]);
  const BIG_KEYS = 200_000;
  /** A command through the container's own CLI, AUTH on stdin (as the agent does it). */
  const cli = (...args: string[]) => sh("docker", ["exec", "-i", uuid, "redis-cli"], { input: redisCliInput(creds.password, args).toString("utf8") });
  const dbsize = async () => (await cli("DBSIZE")).split("\n")[1];
  let bk: DbBackupResult;

  /** The engine with one hook on putArchive (the restore's copy of the RDB file). */
  function withPutArchive(hook: (tar: NodeJS.ReadableStream, call: number) => NodeJS.ReadableStream) {
    let calls = 0;
    const faulty = new Proxy(engine, {
      get(target, prop) {
        if (prop === "putArchive") {
          return (id: string, dir: string, tar: NodeJS.ReadableStream, signal?: AbortSignal) => target.putArchive(id, dir, hook(tar, ++calls), signal);
        }
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    return createHandlers(faulty, { extraLabels: LABELS, stateDir, db: { pollMs: 100, stopTimeoutS: 10 } });
  }

  const healthyWith = async (expected: string) => {
    await until("the database healthy again", async () => (await engine.inspectContainer(uuid))?.health === "healthy", 120_000, 250);
    expect(await k.read(uuid, creds)).toBe(expected);
  };

  beforeAll(async () => {
    // Hex values (LZF does not shrink them): an RDB of about 20 MB, copied in many chunks.
    await cli("EVAL", `for i=1,${BIG_KEYS} do redis.call('SET','big'..i, redis.sha1hex(tostring(i))..redis.sha1hex(tostring(-i))) end`, "0");
    bk = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule: "schedule-redis", s3: false }), job());
  }, 600_000);

  it("a dump whose consumer fails keeps the consumer's reason, and the engine's archive stream is closed", async () => {
    const archives: NodeJS.ReadableStream[] = [];
    const watching = new Proxy(engine, {
      get(target, prop) {
        if (prop === "getArchive") return async (id: string, path: string, signal?: AbortSignal) => archives[archives.push(await target.getArchive(id, path, signal)) - 1]!;
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const id = (await engine.inspectContainer(uuid))!.id;
    const target = (signal: AbortSignal) => ({ engine: watching, container: id, name: uuid, kind: "redis" as const, credentials: creds, signal, progress: () => {}, workDir: stateDir, pollMs: 100 });

    // A local failure (the disk filled up, say) after the first chunk.
    const full = await DRIVERS.redis.dump(target(AbortSignal.timeout(120_000)));
    const diskFull = new Writable({ write: (_chunk, _enc, cb) => cb(new Error("ENOSPC: no space left on device (test)")) });
    await expect(pipeline(full.stream, diskFull)).rejects.toThrow(/ENOSPC/);
    await full.finished(); // no "the RDB file ended after X of Y bytes" in place of ENOSPC
    await until("the archive stream closed", async () => (archives.at(-1) as unknown as { destroyed: boolean }).destroyed, 10_000, 50);

    // A cancel while the file streams.
    const ac = new AbortController();
    const cancelled = await DRIVERS.redis.dump(target(ac.signal));
    const slow = new Writable({
      write: (_chunk, _enc, cb) => {
        ac.abort(new Error("cancelled by the test"));
        setTimeout(cb, 10);
      },
    });
    await expect(pipeline(cancelled.stream, slow, { signal: ac.signal })).rejects.toThrow(/cancelled by the test|aborted/);
    await cancelled.finished();
    await until("the archive stream closed", async () => (archives.at(-1) as unknown as { destroyed: boolean }).destroyed, 10_000, 50);
  });

  it("a cancel during the copy of the RDB does not cut it short: the database comes back whole, with the restored data", async () => {
    await k.drop(uuid, creds);
    const ac = new AbortController();
    const h = withPutArchive((tar) => {
      const counted = new PassThrough();
      let sent = 0;
      tar.on("data", (chunk: Buffer) => {
        sent += chunk.length;
        // Mid-copy: more than the tar header went, far from all of it.
        if (sent > 1024 * 1024 && !ac.signal.aborted) ac.abort(new Error("cancelled by the test"));
      });
      tar.pipe(counted);
      return counted;
    });
    const run = job(ac.signal);
    await expect(h["db.restore"](restorePayload(k, uuid, creds, { local_path: bk.local_path, s3: null }, null), run)).rejects.toThrow(/cancel/);
    expect(ac.signal.aborted).toBe(true);
    await healthyWith("a,b");
    expect(await dbsize()).toBe(String(BIG_KEYS + 1));
  });

  it("a copy that fails midway puts the previous RDB back: the database comes back with its old data", async () => {
    await k.drop(uuid, creds);
    // The server writes its RDB at shutdown: that file is what must come back.
    const before = await dbsize();
    const h = withPutArchive((tar, call) => {
      if (call > 1) return tar;
      // The first copy's tar ends inside the file: the engine has replaced dump.rdb by a truncated one.
      let sent = 0;
      return Readable.from(
        (async function* () {
          for await (const chunk of tar as AsyncIterable<Buffer>) {
            const room = 2 * 1024 * 1024 - sent;
            if (room <= 0) break;
            sent += Math.min(room, chunk.length);
            yield chunk.subarray(0, room);
          }
          (tar as unknown as { destroy(): void }).destroy();
        })(),
      );
    });
    const run = job();
    await expect(h["db.restore"](restorePayload(k, uuid, creds, { local_path: bk.local_path, s3: null }, null), run)).rejects.toThrow(
      /copying the RDB file into the container failed .*; the previous RDB file was put back/,
    );
    await healthyWith("after-drop");
    expect(await dbsize()).toBe(before);
  });
});

describe("clickhouse dumps", () => {
  const k = CASES.find((x) => x.engine === "clickhouse")!;
  const { uuid, creds } = databaseWithRows(k, ["a"]);

  it("the dump is a byte stream that buffers little (not whole 8 MiB parts), and its config file goes with it", async () => {
    // About 24 MB in Native format: several parts.
    await clickhouseRun(uuid, creds, `CREATE TABLE ${creds.database}.n (x UInt64) ENGINE = MergeTree ORDER BY x; INSERT INTO ${creds.database}.n SELECT number FROM system.numbers LIMIT 3000000`);
    const id = (await engine.inspectContainer(uuid))!.id;
    const ac = new AbortController();
    const src = await DRIVERS.clickhouse.dump({ engine, container: id, name: uuid, kind: "clickhouse", credentials: creds, signal: ac.signal, progress: () => {}, workDir: stateDir, pollMs: 100 });
    expect(src.stream.readableObjectMode).toBe(false);
    // Nobody reads: the stream fills its buffer and stops there.
    const first = await new Promise<Buffer>((resolve) => src.stream.once("readable", () => resolve(src.stream.read(512) as Buffer)));
    expect(first.subarray(0, 13).toString()).toBe("manifest.json");
    await new Promise((r) => setTimeout(r, 3000));
    expect(src.stream.readableLength).toBeGreaterThan(0);
    expect(src.stream.readableLength).toBeLessThan(1024 * 1024);
    expect(await sh("docker", ["exec", uuid, "ls", "-a", "/tmp"])).toMatch(/capstan-/);
    src.stream.destroy();
    ac.abort();
    await until("the client config removed", async () => !/capstan-/.test(await sh("docker", ["exec", uuid, "ls", "-a", "/tmp"])), 30_000, 200);
    await until("no client left running", async () => !/clickhouse-client/.test(await sh("docker", ["top", uuid, "-eo", "pid,args"])), 30_000, 200);
  });
});

describe("postgresql backups: what is stored is what was uploaded; retention problems do not fail a stored backup", () => {
  const k = CASES[0]!;
  const { uuid, creds } = databaseWithRows(k, ["x"]);

  it("a backup file that changes before the upload ends fails the run, and neither the object nor the file is kept", async () => {
    const schedule = "schedule-changed";
    const prefix = `changed/${uuid}/`;
    const p = backupPayload(k, uuid, creds, { schedule, prefix });
    const path = join(stateDir, "backups", uuid, schedule, p.filename);
    const run = job();
    // The moment the file is whole (the upload took the same bytes as they were written): it is no
    // longer what was uploaded (a second writer, a bad disk).
    const progress = run.progress;
    run.progress = (line) => {
      if (line === "backup file written") appendFileSync(path, "appended during the upload");
      progress(line);
    };
    await expect(handlers["db.backup"](p, run)).rejects.toThrow(/the upload of changed\/.* sent (\d+) bytes, but the backup file has \d+; the object and the file were removed/);
    expect(await s3.objects(prefix)).toEqual([]);
    expect(await readdir(join(stateDir, "backups", uuid, schedule))).toEqual([]);
  });

  it("a local retention failure after the upload is reported, and the run succeeds with only what really went", async () => {
    const schedule = "schedule-ret-error";
    const prefix = `ret-error/${uuid}/`;
    const first = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule, prefix }), job());
    const second = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule, prefix }), job());
    // Immutable: even root cannot remove it.
    await sh("chattr", ["+i", first.local_path!]);
    try {
      const run = job();
      const third = await handlers["db.backup"](backupPayload(k, uuid, creds, { schedule, prefix, keepLocally: 1 }), run);
      expect(third.s3_key).toBe(`${prefix}${third.filename}`);
      expect(third.local_path).not.toBeNull();
      expect(third.removed_local).toEqual([second.local_path]);
      expect(run.lines.join("\n")).toContain(`local retention could not remove ${first.local_path} (the backup is stored; it is tried again next run): `);
      expect((await readdir(join(stateDir, "backups", uuid, schedule))).sort()).toEqual([first.filename, third.filename].sort());
      expect((await s3.read(third.s3_key!)).length).toBe(third.size);
    } finally {
      await sh("chattr", ["-i", first.local_path!]);
    }
  });
});
