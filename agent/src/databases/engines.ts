import { DATABASE_ENGINE_FACTS, type DatabaseEngine, type DbCredentials } from "@capstan/shared";
import type { ContainerHealthcheck } from "../docker/engine.js";
import { redisConf } from "./redis-conf.js";

/**
 * What the agent knows about each engine's official image: how credentials reach it (the
 * image's own environment conventions), the command when the image's default will not do, files
 * it needs before its first start, and a health probe that tells "accepts connections".
 *
 * Passwords never go into argv (visible in `ps` on the host and in `docker inspect`'s Cmd), and
 * only ClickHouse's goes into the container's environment (which `docker inspect` shows to anyone
 * with access to the engine). The others are in files that the agent copies in between create
 * and start. Each file is mode 600 and owned by the data dir's owner, the server's user:
 * - postgresql, mysql, mariadb, mongodb: the images' entrypoints read their password variables
 *   from files named by `<VAR>_FILE` (POSTGRES_PASSWORD_FILE, ...). The files are in
 *   INIT_SECRETS, outside the volume: initdb and mysqld --initialize refuse a data dir that is
 *   not empty.
 * - redis, keydb: `requirepass` in a redis.conf on the volume, named by the command.
 * - dragonfly: `--requirepass=` in a flagfile on the volume (`--flagfile=`, abseil's standard
 *   flag, documented by Dragonfly). Its other flags stay DFLY_<flag> variables: not secrets.
 * - clickhouse: CLICKHOUSE_PASSWORD. Its probe, clickhouse-client, reads the password from the
 *   environment.
 * - redis-like probes run without the password (see pongProbe).
 */
export interface EngineRuntime {
  /** The engine's own variables; they win over user variables of the same name. */
  env: Record<string, string>;
  /**
   * Variables the engine's processes would read as credentials but the platform does not set:
   * a user variable of that name is dropped (REDISCLI_AUTH would make the probe authenticate
   * with another password).
   */
  reservedEnv?: string[];
  /** undefined: the image's default command. */
  cmd?: string[];
  /** Written into the container after it is created, before it starts. */
  files: EngineFile[];
  healthcheck: ContainerHealthcheck;
  /** The executable the health probe runs (named when an image lacks it). */
  probe: string;
}

export interface EngineFile {
  /** Existing directory inside the container. */
  dir: string;
  /** May have one leading directory, which the engine creates (root-owned, mode 755). */
  name: string;
  content: string;
  /** The directory whose owner gets the file (the server's user): the data dir. */
  ownerOf: string;
}

/** Where init-time password files go: the container's own filesystem, not the volume. */
const INIT_SECRETS = "capstan-init";

/**
 * `<VAR>_FILE` variables that name init-time password files, and the files themselves. A user
 * variable named like the plain variable is reserved: the images refuse to start when both
 * `<VAR>` and `<VAR>_FILE` are set.
 */
function initSecrets(engine: DatabaseEngine, secrets: Record<string, string>): Pick<EngineRuntime, "env" | "files" | "reservedEnv"> {
  const vars = Object.keys(secrets);
  return {
    env: Object.fromEntries(vars.map((v) => [`${v}_FILE`, `/${INIT_SECRETS}/${v.toLowerCase()}`])),
    files: vars.map((v) => ({ dir: "/", name: `${INIT_SECRETS}/${v.toLowerCase()}`, content: secrets[v]!, ownerOf: DATABASE_ENGINE_FACTS[engine].dataDir })),
    reservedEnv: vars,
  };
}

/** Probe timing: every 2 s; up to 3 min to initialise a fresh data dir before failures count. */
const TIMING = { intervalS: 2, timeoutS: 10, retries: 5, startPeriodS: 180 } as const;

const cmdProbe = (...argv: string[]): ContainerHealthcheck => ({ test: ["CMD", ...argv], ...TIMING });

/**
 * An unauthenticated PING: PONG (no password set) or NOAUTH both mean the server is up and
 * answering, as `mysqladmin ping` counts "Access denied". The probe has no password, so none is
 * in the container's environment. The price: Redis checks authentication before loading, so a
 * server still loading its dataset answers NOAUTH too and counts as healthy; the deploy and the
 * RDB restore therefore wait for the load themselves with the password (redis-cli.ts,
 * waitDatasetLoaded). A LOADING reply (a server without a password) is not healthy.
 * redis-cli exits 0 whatever the server answers, and its -e flag exists only from Redis 7.0
 * (not in keydb-cli, nor in the redis-tools of Dragonfly's image): the reply itself is
 * compared, and shown when it is not one of those. A constant script: nothing of the payload
 * is in it.
 */
const pongProbe = (cli: string): ContainerHealthcheck => ({
  test: ["CMD-SHELL", `r=$(${cli} -h 127.0.0.1 -p 6379 ping 2>&1); case "$r" in PONG|*NOAUTH*) exit 0 ;; esac; echo "$r"; exit 1`],
  ...TIMING,
});

/** mysql / mariadb users other than root (their images refuse *_USER=root: root has its own password). */
const regularUser = (c: DbCredentials) => (c.user && c.user !== "root" ? c.user : null);

type Definition = (c: DbCredentials) => EngineRuntime;

const REDIS_CONF = "capstan-redis.conf";
const KEYDB_CONF = "capstan-keydb.conf";
const DRAGONFLY_FLAGS = "capstan-dragonfly.flags";
/** The MYSQL_* names the mariadb image reads when its MARIADB_* ones are not set. */
const MARIADB_FALLBACKS = ["MYSQL_ROOT_PASSWORD", "MYSQL_ROOT_PASSWORD_FILE", "MYSQL_PASSWORD", "MYSQL_PASSWORD_FILE"];
/** Set by no engine, used by the CLIs: a user's value would be read by the probe. */
const REDIS_RESERVED = ["REDISCLI_AUTH"];

/**
 * A Dragonfly flagfile line. abseil reads a flagfile line by line, trims the ends of each and
 * takes the value after `=` verbatim: a value cannot hold a line break or keep surrounding
 * whitespace (the API's passwords have neither).
 */
export function dragonflyFlag(name: string, value: string): string {
  if (/[\r\n]/.test(value) || value.trim() !== value) throw new Error(`the value of --${name} cannot be written to a Dragonfly flagfile (line break or surrounding whitespace)`);
  return `--${name}=${value}\n`;
}

export const ENGINES: Record<DatabaseEngine, Definition> = {
  postgresql: (c) => {
    const user = c.user ?? "postgres";
    const db = c.database ?? user;
    const secrets = initSecrets("postgresql", { POSTGRES_PASSWORD: c.password });
    return {
      // PGDATA explicitly: postgres 18+ images default elsewhere, off the volume.
      env: { POSTGRES_USER: user, POSTGRES_DB: db, PGDATA: DATABASE_ENGINE_FACTS.postgresql.dataDir, ...secrets.env },
      files: secrets.files,
      reservedEnv: secrets.reservedEnv,
      // TCP, not the socket: during initialisation the image's temporary server listens on the socket only.
      healthcheck: cmdProbe("pg_isready", "--host=127.0.0.1", "--port=5432", `--username=${user}`, `--dbname=${db}`),
      probe: "pg_isready",
    };
  },

  mysql: (c) => {
    const user = regularUser(c);
    const secrets = initSecrets("mysql", { MYSQL_ROOT_PASSWORD: c.root_password ?? c.password, ...(user ? { MYSQL_PASSWORD: c.password } : {}) });
    return {
      env: { ...(user ? { MYSQL_USER: user } : {}), ...(c.database ? { MYSQL_DATABASE: c.database } : {}), ...secrets.env },
      files: secrets.files,
      reservedEnv: secrets.reservedEnv,
      // ping exits 0 whenever the server answers, "Access denied" included: no password needed.
      // TCP: the image's initialisation server runs with --skip-networking.
      healthcheck: cmdProbe("mysqladmin", "ping", "--host=127.0.0.1", "--port=3306"),
      probe: "mysqladmin",
    };
  },

  mariadb: (c) => {
    const user = regularUser(c);
    const secrets = initSecrets("mariadb", { MARIADB_ROOT_PASSWORD: c.root_password ?? c.password, ...(user ? { MARIADB_PASSWORD: c.password } : {}) });
    return {
      env: { ...(user ? { MARIADB_USER: user } : {}), ...(c.database ? { MARIADB_DATABASE: c.database } : {}), ...secrets.env },
      files: secrets.files,
      // The image falls back to the MYSQL_* names: a user's MYSQL_ROOT_PASSWORD would fight ours.
      reservedEnv: [...secrets.reservedEnv!, ...MARIADB_FALLBACKS],
      // mariadb:11 no longer ships the mysql* names.
      healthcheck: cmdProbe("mariadb-admin", "ping", "--host=127.0.0.1", "--port=3306"),
      probe: "mariadb-admin",
    };
  },

  mongodb: (c) => {
    const secrets = initSecrets("mongodb", { MONGO_INITDB_ROOT_PASSWORD: c.password });
    return {
      env: { MONGO_INITDB_ROOT_USERNAME: c.user ?? "root", ...(c.database ? { MONGO_INITDB_DATABASE: c.database } : {}), ...secrets.env },
      files: secrets.files,
      reservedEnv: secrets.reservedEnv,
      // ping needs no authentication.
      healthcheck: cmdProbe("mongosh", "--quiet", "--norc", "--eval", "db.adminCommand({ ping: 1 }).ok"),
      probe: "mongosh",
    };
  },

  redis: (c) => ({
    env: {},
    reservedEnv: REDIS_RESERVED,
    cmd: ["redis-server", `${DATABASE_ENGINE_FACTS.redis.dataDir}/${REDIS_CONF}`],
    files: [{ dir: DATABASE_ENGINE_FACTS.redis.dataDir, name: REDIS_CONF, content: redisConf([["requirepass", c.password], ["dir", DATABASE_ENGINE_FACTS.redis.dataDir]]), ownerOf: DATABASE_ENGINE_FACTS.redis.dataDir }],
    healthcheck: pongProbe("redis-cli"),
    probe: "redis-cli",
  }),

  keydb: (c) => ({
    env: {},
    reservedEnv: REDIS_RESERVED,
    // The image's own config first (its Docker defaults), then ours.
    cmd: ["keydb-server", "/etc/keydb/keydb.conf", "--include", `${DATABASE_ENGINE_FACTS.keydb.dataDir}/${KEYDB_CONF}`],
    files: [{ dir: DATABASE_ENGINE_FACTS.keydb.dataDir, name: KEYDB_CONF, content: redisConf([["requirepass", c.password], ["dir", DATABASE_ENGINE_FACTS.keydb.dataDir]]), ownerOf: DATABASE_ENGINE_FACTS.keydb.dataDir }],
    healthcheck: pongProbe("keydb-cli"),
    probe: "keydb-cli",
  }),

  dragonfly: (c) => ({
    env: {
      DFLY_dir: DATABASE_ENGINE_FACTS.dragonfly.dataDir,
      // Snapshots in Redis' RDB format under one fixed name, so backup and restore treat it like Redis.
      DFLY_df_snapshot_format: "false",
      DFLY_dbfilename: "dump",
    },
    // A DFLY_requirepass of the user's would fight the flagfile's.
    reservedEnv: [...REDIS_RESERVED, "DFLY_requirepass"],
    // The image's command plus the flagfile (its entrypoint drops to the server's user for "dragonfly").
    cmd: ["dragonfly", "--logtostderr", `--flagfile=${DATABASE_ENGINE_FACTS.dragonfly.dataDir}/${DRAGONFLY_FLAGS}`],
    files: [{ dir: DATABASE_ENGINE_FACTS.dragonfly.dataDir, name: DRAGONFLY_FLAGS, content: dragonflyFlag("requirepass", c.password), ownerOf: DATABASE_ENGINE_FACTS.dragonfly.dataDir }],
    healthcheck: pongProbe("redis-cli"),
    probe: "redis-cli",
  }),

  clickhouse: (c) => ({
    env: {
      CLICKHOUSE_USER: c.user ?? "default",
      CLICKHOUSE_PASSWORD: c.password,
      // No CLICKHOUSE_DB: the agent creates the database itself once the server is up (deploy.ts).
      // The admin user may create users and grants (SQL-driven access control).
      CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT: "1",
    },
    files: [],
    // clickhouse-client takes CLICKHOUSE_USER / CLICKHOUSE_PASSWORD from the environment (22.3+).
    healthcheck: cmdProbe("clickhouse-client", "--query", "SELECT 1"),
    probe: "clickhouse-client",
  }),
};

export function engineRuntime(engine: DatabaseEngine, credentials: DbCredentials): EngineRuntime {
  return ENGINES[engine](credentials);
}
