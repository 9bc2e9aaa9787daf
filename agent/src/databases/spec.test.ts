import { DATABASE_ENGINE_FACTS, DATABASE_ENGINES, type DatabaseEngine, type DbDeployPayload } from "@capstan/shared";
import { describe, expect, it } from "vitest";
import { engineRuntime } from "./engines.js";
import { dbContainerSpec, dbLabels, mergeEnv } from "./spec.js";

const UUID = "c0ffee00-0000-4000-8000-000000000001";

function payload(engine: DatabaseEngine, over: Partial<DbDeployPayload> = {}): DbDeployPayload {
  return {
    db: { uuid: UUID, name: "orders db" },
    engine,
    image: DATABASE_ENGINE_FACTS[engine].image,
    credentials: { user: "app", password: "secret-password-123", database: "appdb", root_password: engine === "mysql" || engine === "mariadb" ? "root-secret-456" : null },
    env: { TZ: "UTC" },
    network: "capstan",
    networks: [],
    ensure_networks: [],
    public_port: null,
    memory: null,
    cpus: null,
    ...over,
  };
}

const spec = (p: DbDeployPayload, publicHostIp?: string) =>
  dbContainerSpec(p, engineRuntime(p.engine, p.credentials), { extraLabels: { "capstan.test": "1" }, jobId: "job-1", ...(publicHostIp ? { publicHostIp } : {}) });

describe("dbContainerSpec", () => {
  it.each(DATABASE_ENGINES)("%s: named by the uuid on its network, volume at the data dir, restarted unless stopped", (engine) => {
    const facts = DATABASE_ENGINE_FACTS[engine];
    const s = spec(payload(engine));
    expect(s.name).toBe(UUID);
    expect(s.image).toBe(facts.image);
    expect(s.network).toBe("capstan");
    expect(s.restart).toBe("unless-stopped");
    expect(s.mounts).toEqual([{ type: "volume", source: `capstan-db-${UUID}`, target: facts.dataDir }]);
    expect(s.exposedPorts).toEqual([facts.port]);
    expect(s.publish).toBeUndefined();
    expect(s.healthcheck).toBeDefined();
    expect(s.stopTimeoutS).toBeGreaterThanOrEqual(10);
    expect(s.labels).toMatchObject({
      "capstan.test": "1",
      "capstan.managed": "true",
      "capstan.resource.uuid": UUID,
      "capstan.resource.name": "orders db",
      "capstan.resource.type": "database",
      "capstan.database.engine": engine,
      "capstan.job": "job-1",
    });
    // The user's variables are there, under the engine's own.
    expect(s.env?.TZ).toBe("UTC");
    // No password in the command.
    expect((s.cmd ?? []).join(" ")).not.toContain("secret-password-123");
  });

  it("labels every platform label an image could otherwise set (proxy routes, deployment) empty", () => {
    const labels = dbLabels({ uuid: UUID, name: "n" }, "postgresql", {});
    for (const key of ["capstan.proxy.routes", "capstan.domains", "capstan.deployment", "capstan.rollout", "capstan.proxy.port", "capstan.proxy.network"]) {
      expect(labels[key]).toBe("");
    }
  });

  it("the platform's labels win over extra labels of the same name", () => {
    const labels = dbLabels(
      { uuid: UUID, name: "n" },
      "redis",
      { "capstan.resource.type": "application", "capstan.managed": "false", "capstan.database.engine": "postgresql" },
    );
    expect(labels["capstan.resource.type"]).toBe("database");
    expect(labels["capstan.database.engine"]).toBe("redis");
    expect(labels["capstan.managed"]).toBe("true");
  });

  it("publishes the engine's port on 0.0.0.0 only when public_port is set", () => {
    expect(spec(payload("postgresql", { public_port: 15432 })).publish).toEqual([{ port: 5432, hostPort: 15432, hostIp: "0.0.0.0" }]);
    expect(spec(payload("clickhouse", { public_port: 19000 })).publish).toEqual([{ port: 9000, hostPort: 19000, hostIp: "0.0.0.0" }]);
    expect(spec(payload("redis", { public_port: 16379 }), "127.0.0.1").publish).toEqual([{ port: 6379, hostPort: 16379, hostIp: "127.0.0.1" }]);
  });

  it("applies memory and cpu limits", () => {
    const s = spec(payload("mongodb", { memory: "512m", cpus: "1.5" }));
    expect(s.memoryBytes).toBe(512 * 1024 * 1024);
    expect(s.nanoCpus).toBe(1_500_000_000);
    const none = spec(payload("mongodb"));
    expect(none.memoryBytes).toBeUndefined();
    expect(none.nanoCpus).toBeUndefined();
  });

  it("clickhouse's credentials reach the container by env, never argv; the others' passwords by file only", () => {
    const mongo = spec(payload("mongodb"));
    expect(mongo.env).toMatchObject({ MONGO_INITDB_ROOT_USERNAME: "app", MONGO_INITDB_ROOT_PASSWORD_FILE: "/capstan-init/mongo_initdb_root_password" });
    expect(JSON.stringify(mongo.env)).not.toContain("secret-password-123");
    const ch = spec(payload("clickhouse"));
    expect(ch.env).toMatchObject({ CLICKHOUSE_USER: "app", CLICKHOUSE_PASSWORD: "secret-password-123" });
    expect(ch.env).not.toHaveProperty("CLICKHOUSE_DB");
    const df = spec(payload("dragonfly"));
    expect(df.env).toEqual({ TZ: "UTC", DFLY_dir: "/data", DFLY_df_snapshot_format: "false", DFLY_dbfilename: "dump" });
    expect(df.cmd).toEqual(["dragonfly", "--logtostderr", "--flagfile=/data/capstan-dragonfly.flags"]);
    const kdb = spec(payload("keydb"));
    expect(kdb.cmd).toEqual(["keydb-server", "/etc/keydb/keydb.conf", "--include", "/data/capstan-keydb.conf"]);
    expect(kdb.env).toEqual({ TZ: "UTC" });
    for (const s of [df, kdb, spec(payload("redis"))]) expect(JSON.stringify([s.env, s.cmd])).not.toContain("secret-password-123");
  });

  it("a user variable cannot replace an engine variable, nor set one the engine reserves", () => {
    const s = spec(payload("postgresql", { env: { POSTGRES_PASSWORD_FILE: "/elsewhere", EXTRA: "1" } }));
    expect(s.env?.POSTGRES_PASSWORD_FILE).toBe("/capstan-init/postgres_password");
    expect(s.env?.EXTRA).toBe("1");
    // POSTGRES_PASSWORD beside POSTGRES_PASSWORD_FILE would stop the image's entrypoint.
    expect(spec(payload("postgresql", { env: { POSTGRES_PASSWORD: "other" } })).env).not.toHaveProperty("POSTGRES_PASSWORD");
    const maria = spec(payload("mariadb", { env: { MYSQL_ROOT_PASSWORD: "other", MARIADB_PASSWORD: "other" } }));
    expect(JSON.stringify(maria.env)).not.toContain("other");
    expect(mergeEnv({ A: "engine" }, { A: "user", B: "user" })).toEqual({ env: { A: "engine", B: "user" }, overridden: ["A"] });
    expect(mergeEnv({ A: "engine" }, { R: "user", B: "user" }, ["R"])).toEqual({ env: { A: "engine", B: "user" }, overridden: ["R"] });
    // A REDISCLI_AUTH of the user's would make the probe authenticate with it; DFLY_requirepass would fight the flagfile.
    const df = spec(payload("dragonfly", { env: { REDISCLI_AUTH: "x", DFLY_requirepass: "y", KEEP: "1" } }));
    expect(df.env).toMatchObject({ KEEP: "1" });
    expect(df.env).not.toHaveProperty("REDISCLI_AUTH");
    expect(df.env).not.toHaveProperty("DFLY_requirepass");
  });
});
