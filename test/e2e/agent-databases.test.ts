import { randomBytes, randomUUID } from "node:crypto";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseEngine, DbCredentials, DbDeployPayload, JobPayload } from "@capstan/shared";
import { DockerodeEngine } from "../../agent/src/docker/dockerode-engine.js";
import type { JobContext } from "../../agent/src/dispatch/types.js";
import { createHandlers } from "../../agent/src/handlers/index.js";
import { removeLabelled, sh, until } from "./support/kit.js";
import { freePort } from "../support/ports.js";

/**
 * The db.deploy / db.action handlers on the real local engine, with the test images of
 * test/kit/images.sh (Debian's engines behind the official images' conventions). Every
 * connection is made the way an application would: from ANOTHER container on the database's
 * network, by the container name (the db uuid) and the credentials, with the engine's own
 * client; the public port from the host's network namespace on 127.0.0.1. Passwords go to the
 * clients through their environment or stdin, never argv.
 *
 * Engines: postgresql (PostgreSQL 15), mysql and mariadb (both MariaDB 10.11: Debian has no
 * MySQL), redis (Redis 7), clickhouse (ClickHouse 18.16). keydb and dragonfly run on STAND-INS
 * (redis-server behind keydb-server / Dragonfly's DFLY_* variables and flagfile): they exercise the agent's
 * code paths for those engines, not the engines. mongodb has no test here: neither MongoDB nor
 * mongosh is in Debian's archive (its spec is covered by the unit tests).
 */
const RUN = randomBytes(4).toString("hex");
const NET = `capstan-test-db-${RUN}`;
const LABELS = { "capstan.test": "1", "capstan.test.run": RUN };

const engine = new DockerodeEngine();
let handlers: ReturnType<typeof createHandlers>;

function job(signal: AbortSignal = AbortSignal.timeout(240_000)): JobContext & { lines: string[] } {
  const lines: string[] = [];
  return { signal, progress: (l) => void lines.push(l), job: { id: `job-${randomUUID()}`, attempt: 1 }, lines };
}

/** A password with the characters config files and SQL quote: the agent and the images must carry it intact. */
const password = () => `pw"'\\ #$x-${randomBytes(12).toString("hex")}`;

/** Can a TCP connection to 127.0.0.1:port be opened? (refused = false) */
function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: "127.0.0.1", port, timeout: 3_000 });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
    s.once("timeout", () => {
      s.destroy();
      resolve(false);
    });
  });
}

/**
 * Runs an engine client in a throwaway container: on the test network (by name) or on the host's
 * network (public port). `secretEnv` values reach it as `-e NAME` (taken from this process's
 * environment, not argv); `input` goes to its stdin.
 */
async function client(
  image: string,
  argv: string[],
  opts: { host: boolean; secretEnv?: Record<string, string>; input?: string; entrypoint?: string },
): Promise<string> {
  const args = ["run", "--rm", "-i", "--label", "capstan.test=1", "--label", `capstan.test.run=${RUN}`, "--network", opts.host ? "host" : NET];
  for (const k of Object.keys(opts.secretEnv ?? {})) args.push("-e", k);
  if (opts.entrypoint) args.push("--entrypoint", opts.entrypoint);
  args.push(image, ...argv);
  return sh("docker", args, { env: opts.secretEnv ?? {}, input: opts.input ?? "", timeoutMs: 60_000 });
}

/** Where a client connects: the db uuid on the network, or 127.0.0.1:public port from the host. */
type Target = { host: false; name: string } | { host: true; port: number };
const hostOf = (t: Target) => (t.host ? "127.0.0.1" : t.name);

interface Case {
  engine: DatabaseEngine;
  image: string;
  /** What really runs (stand-ins say so). */
  what: string;
  credentials: () => DbCredentials;
  port: number;
  /** Appends a value to the test table / list. */
  write(t: Target, c: DbCredentials, value: string): Promise<void>;
  /** The values, sorted, joined by ",". */
  read(t: Target, c: DbCredentials): Promise<string>;
}

const sql = (image: string, cli: string): Pick<Case, "write" | "read"> => {
  const run = (t: Target, c: DbCredentials, query: string) =>
    client(image, [cli, `--host=${hostOf(t)}`, `--port=${t.host ? t.port : 3306}`, `--user=${c.user}`, "--batch", "--skip-column-names", `--execute=${query}`, c.database!], {
      host: t.host,
      secretEnv: { MYSQL_PWD: c.password },
    });
  return {
    write: async (t, c, v) => void (await run(t, c, `CREATE TABLE IF NOT EXISTS t (v VARCHAR(64)); INSERT INTO t VALUES ('${v}');`)),
    read: (t, c) => run(t, c, "SELECT GROUP_CONCAT(v ORDER BY v) FROM t;"),
  };
};

const redisLike = (image: string, cli: string): Pick<Case, "write" | "read"> => {
  const run = (t: Target, c: DbCredentials, ...cmd: string[]) =>
    client(image, [cli, "-h", hostOf(t), "-p", String(t.host ? t.port : 6379), ...cmd], { host: t.host, secretEnv: { REDISCLI_AUTH: c.password } });
  return {
    write: async (t, c, v) => {
      expect(await run(t, c, "RPUSH", "t", v)).toMatch(/^\d+$/);
    },
    read: async (t, c) => (await run(t, c, "LRANGE", "t", "0", "-1")).split("\n").filter(Boolean).sort().join(","),
  };
};

const xml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");

/** ClickHouse 18.16's client reads no password variable: its config file comes in on stdin. */
const clickhouse: Pick<Case, "write" | "read"> = (() => {
  const run = (t: Target, c: DbCredentials, query: string) =>
    client(
      "capstan-test/clickhouse",
      ["-c", 'mkdir -p "$HOME/.clickhouse-client" && cat >"$HOME/.clickhouse-client/config.xml" && exec clickhouse-client --host "$1" --port "$2" --multiquery --query "$3"', "sh", hostOf(t), String(t.host ? t.port : 9000), query],
      { host: t.host, entrypoint: "sh", input: `<config><user>${xml(c.user!)}</user><password>${xml(c.password)}</password></config>\n` },
    );
  return {
    write: async (t, c, v) => void (await run(t, c, `CREATE TABLE IF NOT EXISTS ${c.database}.t (v String) ENGINE = MergeTree ORDER BY v; INSERT INTO ${c.database}.t VALUES ('${v}')`)),
    read: (t, c) => run(t, c, `SELECT arrayStringConcat(groupArray(v), ',') FROM (SELECT v FROM ${c.database}.t ORDER BY v)`),
  };
})();

/** Where each engine's password files are, and the user its server runs as (ClickHouse: in its env). */
const PASSWORD_FILES: Partial<Record<DatabaseEngine, { files: string[]; user: string }>> = {
  postgresql: { files: ["/capstan-init/postgres_password"], user: "postgres" },
  mysql: { files: ["/capstan-init/mysql_root_password", "/capstan-init/mysql_password"], user: "mysql" },
  mariadb: { files: ["/capstan-init/mariadb_root_password", "/capstan-init/mariadb_password"], user: "mysql" },
  redis: { files: ["/data/capstan-redis.conf"], user: "redis" },
  keydb: { files: ["/data/capstan-keydb.conf"], user: "keydb" },
  dragonfly: { files: ["/data/capstan-dragonfly.flags"], user: "dfly" },
};

const CASES: Case[] = [
  {
    engine: "postgresql",
    image: "capstan-test/postgres",
    what: "PostgreSQL 15",
    port: 5432,
    credentials: () => ({ user: "app", password: password(), database: "appdb", root_password: null }),
    // The internal_db_url's shape, the password from PGPASSWORD.
    ...(() => {
      const run = (t: Target, c: DbCredentials, query: string) =>
        client("capstan-test/postgres", ["psql", `postgresql://${c.user}@${hostOf(t)}:${t.host ? t.port : 5432}/${c.database}`, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", query], {
          host: t.host,
          secretEnv: { PGPASSWORD: c.password },
        });
      return {
        write: async (t: Target, c: DbCredentials, v: string) => void (await run(t, c, `CREATE TABLE IF NOT EXISTS t (v text); INSERT INTO t VALUES ('${v}');`)),
        read: (t: Target, c: DbCredentials) => run(t, c, "SELECT coalesce(string_agg(v, ',' ORDER BY v), '') FROM t;"),
      };
    })(),
  },
  {
    engine: "mysql",
    image: "capstan-test/mariadb",
    what: "MariaDB 10.11 through the MYSQL_* variables and mysql* tools (Debian has no MySQL)",
    port: 3306,
    credentials: () => ({ user: "app", password: password(), database: "appdb", root_password: password() }),
    ...sql("capstan-test/mariadb", "mysql"),
  },
  {
    engine: "mariadb",
    image: "capstan-test/mariadb",
    what: "MariaDB 10.11",
    port: 3306,
    credentials: () => ({ user: "app", password: password(), database: "appdb", root_password: password() }),
    ...sql("capstan-test/mariadb", "mariadb"),
  },
  {
    engine: "redis",
    image: "capstan-test/redis",
    what: "Redis 7",
    port: 6379,
    credentials: () => ({ user: null, password: password(), database: null, root_password: null }),
    ...redisLike("capstan-test/redis", "redis-cli"),
  },
  {
    engine: "keydb",
    image: "capstan-test/keydb-standin",
    what: "STAND-IN for KeyDB: Redis 7 under keydb-server / keydb-cli",
    port: 6379,
    credentials: () => ({ user: null, password: password(), database: null, root_password: null }),
    ...redisLike("capstan-test/keydb-standin", "keydb-cli"),
  },
  {
    engine: "dragonfly",
    image: "capstan-test/dragonfly-standin",
    what: "STAND-IN for Dragonfly: Redis 7 configured from DFLY_* variables and a flagfile",
    port: 6379,
    credentials: () => ({ user: null, password: password(), database: null, root_password: null }),
    ...redisLike("capstan-test/dragonfly-standin", "redis-cli"),
  },
  {
    engine: "clickhouse",
    image: "capstan-test/clickhouse",
    what: "ClickHouse 18.16",
    port: 9000,
    credentials: () => ({ user: "admin", password: password(), database: "appdb", root_password: null }),
    ...clickhouse,
  },
];

function deployPayload(k: Case, uuid: string, credentials: DbCredentials, over: Partial<DbDeployPayload> = {}): DbDeployPayload {
  return {
    db: { uuid, name: `e2e ${k.engine}` },
    engine: k.engine,
    image: k.image,
    credentials,
    env: { TZ: "UTC" },
    network: NET,
    networks: [],
    ensure_networks: [],
    public_port: null,
    memory: "512m",
    cpus: "1",
    ...over,
  };
}

const action = (uuid: string, a: JobPayload<"db.action">["action"], over: Partial<JobPayload<"db.action">> = {}): JobPayload<"db.action"> => ({
  db: { uuid, name: "e2e" },
  action: a,
  delete_volumes: false,
  docker_cleanup: false,
  ...over,
});

const volumeOf = (uuid: string) => `capstan-db-${uuid}`;
const containersOnVolume = async (uuid: string) => (await sh("docker", ["ps", "-aq", "--filter", `volume=${volumeOf(uuid)}`])).split("\n").filter(Boolean);
const volumeExists = async (uuid: string) => (await sh("docker", ["volume", "ls", "-q", "--filter", `name=^${volumeOf(uuid)}$`])) === volumeOf(uuid);

/** Redeploys while polling which containers mount the volume; returns the most seen at once. */
async function redeployWatchingVolume(p: DbDeployPayload): Promise<{ max: number; status: string }> {
  let max = 0;
  let done = false;
  const watcher = (async () => {
    for (let i = 0; i < 3_000 && !done; i++) {
      max = Math.max(max, (await containersOnVolume(p.db.uuid)).length);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    const res = await handlers["db.deploy"](p, job());
    return { max, status: res.status };
  } finally {
    done = true;
    await watcher;
  }
}

beforeAll(async () => {
  await engine.createNetwork({ name: NET, driver: "bridge", labels: { ...LABELS, "capstan.managed": "true" } });
  // Published ports on loopback only (production: 0.0.0.0); short stop grace (production: 30 s).
  handlers = createHandlers(engine, { extraLabels: LABELS, db: { publicHostIp: "127.0.0.1", pollMs: 100, stopTimeoutS: 10 } });
}, 120_000);

afterAll(async () => {
  await removeLabelled(RUN);
  await sh("docker", ["rmi", `capstan-test/db-cleanup:${RUN}`]).catch(() => {});
  await sh("docker", ["network", "rm", NET]).catch(() => {});
}, 120_000);

describe.each(CASES)("db.deploy $engine ($what)", (k) => {
  it("deploys, connects from another container, redeploys in place, publishes and closes the public port, removes", async () => {
    const uuid = randomUUID();
    const creds = k.credentials();
    const onNet: Target = { host: false, name: uuid };

    const first = job();
    expect(await handlers["db.deploy"](deployPayload(k, uuid, creds), first)).toEqual({ container: uuid, status: "running:healthy" });
    expect(first.lines.join("\n")).not.toContain(creds.password);
    const c = await engine.inspectContainer(uuid);
    expect(c?.labels).toMatchObject({
      "capstan.managed": "true",
      "capstan.resource.uuid": uuid,
      "capstan.resource.type": "database",
      "capstan.database.engine": k.engine,
      "capstan.test": "1",
    });
    // No password in the command line the engine shows (docker inspect / ps).
    expect(await sh("docker", ["inspect", "-f", "{{json .Config.Cmd}} {{json .Args}} {{.Path}}", uuid])).not.toContain(creds.password);
    // All but ClickHouse take it from a file only: not in the container's environment either
    // (the images' entrypoints read <VAR>_FILE); no engine gets REDISCLI_AUTH.
    const containerEnv = await sh("docker", ["inspect", "-f", "{{json .Config.Env}}", uuid]);
    expect(containerEnv).not.toContain("REDISCLI_AUTH");
    const secretFiles = PASSWORD_FILES[k.engine];
    if (secretFiles) {
      for (const p of [creds.password, creds.root_password]) if (p) expect(containerEnv).not.toContain(p);
      // Each file is the server's own (it runs as that user), mode 600.
      for (const file of secretFiles.files) expect(await sh("docker", ["exec", uuid, "stat", "-c", "%a %U", file])).toBe(`600 ${secretFiles.user}`);
    }
    expect(await sh("docker", ["inspect", "-f", "{{.HostConfig.RestartPolicy.Name}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}}", uuid])).toBe("unless-stopped 536870912 1000000000");

    await k.write(onNet, creds, "a");
    expect(await k.read(onNet, creds)).toBe("a");

    // In place, now published: the data survives and no second container ever mounts the volume.
    const port = await freePort();
    const second = await redeployWatchingVolume(deployPayload(k, uuid, creds, { public_port: port }));
    expect(second.status).toBe("running:healthy");
    expect(second.max).toBe(1);
    expect((await engine.listContainers({ "capstan.resource.uuid": uuid })).map((x) => x.name)).toEqual([uuid]);
    expect(await k.read(onNet, creds)).toBe("a");
    await k.write(onNet, creds, "b");
    expect(await k.read({ host: true, port }, creds)).toBe("a,b");

    // Closed again: nothing listens on the port any more.
    const third = await redeployWatchingVolume(deployPayload(k, uuid, creds, { public_port: null }));
    expect(third.max).toBe(1);
    expect(await tcpOpen(port)).toBe(false);
    expect(await k.read(onNet, creds)).toBe("a,b");

    expect(await handlers["db.action"](action(uuid, "remove", { delete_volumes: true }), job())).toEqual({ status: "removed" });
    expect(await engine.inspectContainer(uuid)).toBeNull();
    expect(await volumeExists(uuid)).toBe(false);
  });
});

describe("db.action on postgresql", () => {
  const k = CASES[0]!;

  it("stop, start, restart change the engine state; remove keeps the data unless delete_volumes", async () => {
    const uuid = randomUUID();
    const creds = k.credentials();
    const onNet: Target = { host: false, name: uuid };
    await handlers["db.deploy"](deployPayload(k, uuid, creds), job());
    await k.write(onNet, creds, "kept");

    expect((await handlers["db.action"](action(uuid, "stop"), job())).status).toMatch(/^exited:/);
    expect((await engine.inspectContainer(uuid))?.running).toBe(false);
    await expect(k.read(onNet, creds)).rejects.toThrow();

    expect((await handlers["db.action"](action(uuid, "start"), job())).status).toMatch(/^running:/);
    await until("healthy after start", async () => (await engine.inspectContainer(uuid))?.health === "healthy", 60_000, 250);
    expect(await k.read(onNet, creds)).toBe("kept");

    const before = (await engine.inspectContainer(uuid))?.startedAt;
    expect((await handlers["db.action"](action(uuid, "restart"), job())).status).toMatch(/^running:/);
    expect((await engine.inspectContainer(uuid))?.startedAt).not.toBe(before);
    await until("healthy after restart", async () => (await engine.inspectContainer(uuid))?.health === "healthy", 60_000, 250);

    // Remove without delete_volumes: the container goes, the data stays for the next deploy.
    await handlers["db.action"](action(uuid, "remove"), job());
    expect(await engine.inspectContainer(uuid)).toBeNull();
    expect(await volumeExists(uuid)).toBe(true);
    await expect(handlers["db.action"](action(uuid, "start"), job())).rejects.toThrow(/no container on this server; deploy it first/);
    await handlers["db.deploy"](deployPayload(k, uuid, creds), job());
    expect(await k.read(onNet, creds)).toBe("kept");

    await handlers["db.action"](action(uuid, "remove", { delete_volumes: true }), job());
    expect(await volumeExists(uuid)).toBe(false);
  });

  it("docker_cleanup removes the database's image when nothing else uses it", async () => {
    const uuid = randomUUID();
    const image = `capstan-test/db-cleanup:${RUN}`;
    // An image of its own (a label makes a new id): other suites run capstan-test/redis at the
    // same time, and the cleanup rightly keeps an image whose id a container still uses.
    await sh("docker", ["build", "-q", "-t", image, "--label", `capstan.test.run=${RUN}`, "-"], { input: "FROM capstan-test/redis:latest\n" });
    const k = CASES.find((x) => x.engine === "redis")!;
    await handlers["db.deploy"]({ ...deployPayload(k, uuid, k.credentials()), image }, job());
    const ctx = job();
    await handlers["db.action"](action(uuid, "remove", { delete_volumes: true, docker_cleanup: true }), ctx);
    expect(ctx.lines).toContain(`image ${image} removed`);
    await expect(sh("docker", ["image", "inspect", image])).rejects.toThrow();
    // Only that tag went: the test image itself is still there.
    await sh("docker", ["image", "inspect", "capstan-test/redis:latest"]);
  });

  it("fails fast, with the engine's reason, when the image cannot run the engine's health check", async () => {
    const uuid = randomUUID();
    const started = Date.now();
    // A redis image given as postgresql: it runs, but has no pg_isready.
    const p = { ...deployPayload(k, uuid, k.credentials()), image: "capstan-test/redis" };
    await expect(handlers["db.deploy"](p, job())).rejects.toThrow(/cannot run the health check: pg_isready is missing/);
    expect(Date.now() - started).toBeLessThan(60_000);
    await handlers["db.action"](action(uuid, "remove", { delete_volumes: true }), job());
  });
});
