import { DATABASE_ENGINE_FACTS, DATABASE_ENGINES, type DatabaseEngine, type DbCredentials } from "@capstan/shared";
import { describe, expect, it } from "vitest";
import { dragonflyFlag, ENGINES, engineRuntime } from "./engines.js";
import { redisConfValue } from "./redis-conf.js";

const PASSWORD = 'pw-"quoted"\\back\nline-ünï';
const ROOT = "root-secret-0123456789";
/** A Dragonfly flagfile line cannot hold a line break (tested below): the same password without it. */
const passwordFor = (engine: DatabaseEngine) => (engine === "dragonfly" ? PASSWORD.replace("\n", "-") : PASSWORD);
const creds = (over: Partial<DbCredentials> = {}): DbCredentials => ({ user: "app", password: PASSWORD, database: "appdb", root_password: ROOT, ...over });

describe("engine table", () => {
  it("covers every engine of the protocol", () => {
    expect(Object.keys(ENGINES).sort()).toEqual([...DATABASE_ENGINES].sort());
  });

  it.each(DATABASE_ENGINES)("%s: no password in the command or the health check argv", (engine) => {
    const r = engineRuntime(engine, creds({ password: passwordFor(engine) }));
    const argv = [...(r.cmd ?? []), ...r.healthcheck.test];
    for (const secret of [PASSWORD, ROOT, "pw-"]) expect(argv.join(" ")).not.toContain(secret);
    // The probe is bounded and runs from the start: the deploy waits on it.
    expect(r.healthcheck.intervalS).toBeGreaterThan(0);
    expect(r.healthcheck.timeoutS).toBeGreaterThan(0);
    expect(r.healthcheck.retries).toBeGreaterThan(0);
    expect(["CMD", "CMD-SHELL"]).toContain(r.healthcheck.test[0]);
    expect(r.healthcheck.test.join(" ")).toContain(r.probe);
  });

  it.each(["redis", "keydb", "dragonfly"] as DatabaseEngine[])("%s: no password in the container's environment; the probe takes PONG or NOAUTH as up", (engine) => {
    const r = engineRuntime(engine, creds({ user: null, password: passwordFor(engine), database: null, root_password: null }));
    expect(JSON.stringify(r.env)).not.toContain("pw-");
    expect(r.env).not.toHaveProperty("REDISCLI_AUTH");
    expect(r.reservedEnv).toContain("REDISCLI_AUTH");
    expect(r.healthcheck.test[0]).toBe("CMD-SHELL");
    expect(r.healthcheck.test[1]).toBe(`r=$(${r.probe} -h 127.0.0.1 -p 6379 ping 2>&1); case "$r" in PONG|*NOAUTH*) exit 0 ;; esac; echo "$r"; exit 1`);
    // The password is only in the file the server reads.
    expect(r.files).toHaveLength(1);
    expect(r.files[0]!.dir).toBe("/data");
  });

  it.each(DATABASE_ENGINES.filter((e) => e !== "clickhouse"))("%s: no password anywhere in the container's environment", (engine) => {
    const r = engineRuntime(engine, creds({ password: passwordFor(engine) }));
    const env = JSON.stringify(r.env);
    for (const secret of [passwordFor(engine), ROOT]) expect(env).not.toContain(secret);
    // It is in a file the server reads (quoted for the redis-like engines' config syntax).
    expect(r.files.length).toBeGreaterThan(0);
  });

  it("postgresql: the official image's variables, PGDATA on the volume, pg_isready over TCP", () => {
    const r = engineRuntime("postgresql", creds());
    expect(r.env).toEqual({
      POSTGRES_USER: "app",
      POSTGRES_PASSWORD_FILE: "/capstan-init/postgres_password",
      POSTGRES_DB: "appdb",
      PGDATA: DATABASE_ENGINE_FACTS.postgresql.dataDir,
    });
    expect(r.cmd).toBeUndefined();
    // Outside the volume (initdb wants an empty data dir), owned like the data dir.
    expect(r.files).toEqual([{ dir: "/", name: "capstan-init/postgres_password", content: PASSWORD, ownerOf: DATABASE_ENGINE_FACTS.postgresql.dataDir }]);
    expect(r.reservedEnv).toEqual(["POSTGRES_PASSWORD"]);
    expect(r.healthcheck.test).toEqual(["CMD", "pg_isready", "--host=127.0.0.1", "--port=5432", "--username=app", "--dbname=appdb"]);
  });

  it("postgresql: defaults like the image (user postgres, database named after the user)", () => {
    const r = engineRuntime("postgresql", creds({ user: null, database: null }));
    expect(r.env).toMatchObject({ POSTGRES_USER: "postgres", POSTGRES_DB: "postgres" });
  });

  it("mysql: MYSQL_* with the root password; mysqladmin ping over TCP", () => {
    const r = engineRuntime("mysql", creds());
    expect(r.env).toEqual({
      MYSQL_ROOT_PASSWORD_FILE: "/capstan-init/mysql_root_password",
      MYSQL_USER: "app",
      MYSQL_PASSWORD_FILE: "/capstan-init/mysql_password",
      MYSQL_DATABASE: "appdb",
    });
    expect(r.files.map((f) => [f.dir, f.name, f.content, f.ownerOf])).toEqual([
      ["/", "capstan-init/mysql_root_password", ROOT, "/var/lib/mysql"],
      ["/", "capstan-init/mysql_password", PASSWORD, "/var/lib/mysql"],
    ]);
    expect(r.reservedEnv).toEqual(["MYSQL_ROOT_PASSWORD", "MYSQL_PASSWORD"]);
    expect(r.healthcheck.test).toEqual(["CMD", "mysqladmin", "ping", "--host=127.0.0.1", "--port=3306"]);
  });

  it("mariadb: MARIADB_*; mariadb-admin (mariadb:11 has no mysql* names)", () => {
    const r = engineRuntime("mariadb", creds());
    expect(r.env).toEqual({
      MARIADB_ROOT_PASSWORD_FILE: "/capstan-init/mariadb_root_password",
      MARIADB_USER: "app",
      MARIADB_PASSWORD_FILE: "/capstan-init/mariadb_password",
      MARIADB_DATABASE: "appdb",
    });
    expect(r.files.map((f) => [f.name, f.content])).toEqual([
      ["capstan-init/mariadb_root_password", ROOT],
      ["capstan-init/mariadb_password", PASSWORD],
    ]);
    // The image falls back to the MYSQL_* names: a user's would fight the platform's.
    expect(r.reservedEnv).toEqual(expect.arrayContaining(["MARIADB_ROOT_PASSWORD", "MARIADB_PASSWORD", "MYSQL_ROOT_PASSWORD", "MYSQL_PASSWORD_FILE"]));
    expect(r.healthcheck.test.slice(0, 3)).toEqual(["CMD", "mariadb-admin", "ping"]);
  });

  it.each(["mysql", "mariadb"] as DatabaseEngine[])("%s: user root is the root account (the images refuse *_USER=root)", (engine) => {
    const r = engineRuntime(engine, creds({ user: "root", root_password: null }));
    const prefix = engine === "mysql" ? "MYSQL" : "MARIADB";
    expect(r.env).toEqual({ [`${prefix}_ROOT_PASSWORD_FILE`]: `/capstan-init/${prefix.toLowerCase()}_root_password`, [`${prefix}_DATABASE`]: "appdb" });
    expect(r.files.map((f) => f.content)).toEqual([PASSWORD]);
  });

  it("mongodb: MONGO_INITDB_*; mongosh ping (no credentials needed)", () => {
    const r = engineRuntime("mongodb", creds({ root_password: null }));
    expect(r.env).toEqual({ MONGO_INITDB_ROOT_USERNAME: "app", MONGO_INITDB_ROOT_PASSWORD_FILE: "/capstan-init/mongo_initdb_root_password", MONGO_INITDB_DATABASE: "appdb" });
    expect(r.files).toEqual([{ dir: "/", name: "capstan-init/mongo_initdb_root_password", content: PASSWORD, ownerOf: "/data/db" }]);
    expect(r.healthcheck.test).toEqual(["CMD", "mongosh", "--quiet", "--norc", "--eval", "db.adminCommand({ ping: 1 }).ok"]);
    expect(engineRuntime("mongodb", creds({ user: null, database: null })).env).toEqual({
      MONGO_INITDB_ROOT_USERNAME: "root",
      MONGO_INITDB_ROOT_PASSWORD_FILE: "/capstan-init/mongo_initdb_root_password",
    });
  });

  it("redis: requirepass in a config file on the volume, named by the command", () => {
    const r = engineRuntime("redis", creds({ user: null, database: null, root_password: null }));
    expect(r.cmd).toEqual(["redis-server", "/data/capstan-redis.conf"]);
    expect(r.files).toEqual([{ dir: "/data", name: "capstan-redis.conf", content: `requirepass ${redisConfValue(PASSWORD)}\ndir "/data"\n`, ownerOf: "/data" }]);
    expect(r.env).toEqual({});
  });

  it("keydb: the image's config, then an include with requirepass; keydb-cli probe", () => {
    const r = engineRuntime("keydb", creds({ user: null, database: null, root_password: null }));
    expect(r.cmd).toEqual(["keydb-server", "/etc/keydb/keydb.conf", "--include", "/data/capstan-keydb.conf"]);
    expect(r.files[0]!.content).toContain(`requirepass ${redisConfValue(PASSWORD)}`);
    expect(r.probe).toBe("keydb-cli");
  });

  it("dragonfly: the password in a flagfile on the volume, named by the image's command; the other flags as DFLY_<flag>", () => {
    const pw = 'pw-"quoted"\\back #x:y';
    const r = engineRuntime("dragonfly", creds({ user: null, password: pw, database: null, root_password: null }));
    expect(r.env).toEqual({ DFLY_dir: "/data", DFLY_df_snapshot_format: "false", DFLY_dbfilename: "dump" });
    expect(r.reservedEnv).toEqual(["REDISCLI_AUTH", "DFLY_requirepass"]);
    expect(r.cmd).toEqual(["dragonfly", "--logtostderr", "--flagfile=/data/capstan-dragonfly.flags"]);
    // abseil takes the value after "=" verbatim.
    expect(r.files).toEqual([{ dir: "/data", name: "capstan-dragonfly.flags", content: `--requirepass=${pw}\n`, ownerOf: "/data" }]);
  });

  it("dragonfly: a password a flagfile cannot carry (line break, surrounding whitespace) is refused, not cut", () => {
    expect(() => dragonflyFlag("requirepass", "a\nb")).toThrow(/cannot be written to a Dragonfly flagfile/);
    expect(() => dragonflyFlag("requirepass", " padded")).toThrow(/cannot be written/);
    expect(dragonflyFlag("requirepass", "in side")).toBe("--requirepass=in side\n");
  });

  it("clickhouse: CLICKHOUSE_USER / _PASSWORD with access management, never CLICKHOUSE_DB (the agent creates it); clickhouse-client SELECT 1", () => {
    const r = engineRuntime("clickhouse", creds({ root_password: null }));
    expect(r.env).toEqual({ CLICKHOUSE_USER: "app", CLICKHOUSE_PASSWORD: PASSWORD, CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT: "1" });
    expect(r.healthcheck.test).toEqual(["CMD", "clickhouse-client", "--query", "SELECT 1"]);
    expect(engineRuntime("clickhouse", creds({ user: null, database: null })).env).toMatchObject({ CLICKHOUSE_USER: "default" });
    expect(engineRuntime("clickhouse", creds({ database: "default" })).env).not.toHaveProperty("CLICKHOUSE_DB");
  });
});

describe("redisConfValue", () => {
  it("quotes so that no value can end its line or its quotes", () => {
    expect(redisConfValue("plain-Value_1")).toBe('"plain-Value_1"');
    expect(redisConfValue('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(redisConfValue("x\nrequirepass evil\r")).toBe('"x\\x0arequirepass evil\\x0d"');
    expect(redisConfValue("é")).toBe('"\\xc3\\xa9"');
    expect(redisConfValue("a b#c")).toBe('"a b#c"');
  });
});
