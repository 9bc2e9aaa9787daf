import { describe, expect, it } from "vitest";
import { DATABASE_ENGINES } from "../protocol/databases.js";
import { CREATE_DATABASE_BODIES, UpdateDatabaseBody, databaseUrl, splitCreateBody } from "./databases.js";

const where = { project_uuid: "p", environment_name: "production", server_uuid: "s", destination_uuid: "d" };

describe("databaseUrl", () => {
  it("percent-encodes user and password and brackets IPv6 hosts", () => {
    expect(databaseUrl("postgresql", { user: "a b", password: "p@ss/w:rd?#%", database: "shop" }, "db1", 5432)).toBe(
      "postgres://a%20b:p%40ss%2Fw%3Ard%3F%23%25@db1:5432/shop",
    );
    expect(databaseUrl("redis", { user: null, password: "x", database: null }, "2001:db8::1", 6380)).toBe("redis://default:x@[2001:db8::1]:6380/0");
    expect(databaseUrl("mongodb", { user: "root", password: "x", database: "events" }, "h", 27017)).toBe("mongodb://root:x@h:27017/events?authSource=admin");
    expect(databaseUrl("clickhouse", { user: "default", password: "x", database: null }, "h", 9000)).toBe("clickhouse://default:x@h:9000/default");
    expect(databaseUrl("clickhouse", { user: "default", password: "x", database: "analytics" }, "h", 9000)).toBe("clickhouse://default:x@h:9000/analytics");
  });

  it("round-trips through URL parsing for every engine", () => {
    const password = "!#$&'()*+,/:;=?@[]~%";
    for (const engine of DATABASE_ENGINES) {
      const u = new URL(databaseUrl(engine, { user: "u_1", password, database: "d_1" }, "host", 1234));
      expect(decodeURIComponent(u.password), engine).toBe(password);
      expect(u.hostname).toBe("host");
      expect(u.port).toBe("1234");
    }
  });
});

describe("create bodies", () => {
  it("split into the common part and the credentials by role", () => {
    const body = CREATE_DATABASE_BODIES.mysql.parse({ ...where, mysql_user: "app", mysql_password: "secret-pw", mysql_root_password: "root-pw-1", mysql_database: "db" });
    const { common, credentials } = splitCreateBody("mysql", body as Record<string, unknown>);
    expect(credentials).toEqual({ user: "app", password: "secret-pw", database: "db", root_password: "root-pw-1" });
    expect(common).toEqual({ ...where, is_public: false, instant_deploy: true });
  });

  it("clickhouse takes clickhouse_db: an identifier of at most 64 characters, not one of ClickHouse's own databases", () => {
    const body = CREATE_DATABASE_BODIES.clickhouse.parse({ ...where, clickhouse_admin_user: "app", clickhouse_db: "analytics" });
    expect(splitCreateBody("clickhouse", body as Record<string, unknown>).credentials).toEqual({ user: "app", password: undefined, database: "analytics", root_password: undefined });
    expect(splitCreateBody("clickhouse", CREATE_DATABASE_BODIES.clickhouse.parse(where) as Record<string, unknown>).credentials.database).toBeUndefined();
    expect(CREATE_DATABASE_BODIES.clickhouse.safeParse({ ...where, clickhouse_db: "d".repeat(64) }).success).toBe(true);
    for (const bad of ["d".repeat(65), "1st", "a-b", "a`b", "", "system", "INFORMATION_SCHEMA", "information_schema", "_temporary_and_external_tables"]) {
      const r = CREATE_DATABASE_BODIES.clickhouse.safeParse({ ...where, clickhouse_db: bad });
      expect(r.success, bad).toBe(false);
      expect([...new Set(r.error!.issues.map((i) => i.path.join(".")))], bad).toEqual(["clickhouse_db"]);
    }
  });

  it("are strict: unknown fields are named in one message", () => {
    const r = CREATE_DATABASE_BODIES.redis.safeParse({ ...where, redis_password: "password-1", postgres_db: "x", extra: 1 });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.message)).toEqual(["Unknown field(s): postgres_db, extra. This path does not take them."]);
  });

  it("need public_port when public", () => {
    const r = CREATE_DATABASE_BODIES.postgresql.safeParse({ ...where, is_public: true });
    expect(r.error!.issues.map((i) => [i.path.join("."), i.message])).toEqual([["public_port", "Required when is_public is true."]]);
    expect(CREATE_DATABASE_BODIES.postgresql.safeParse({ ...where, is_public: true, public_port: 5433 }).success).toBe(true);
  });

  it("PATCH needs a field and refuses credentials", () => {
    expect(UpdateDatabaseBody.safeParse({}).success).toBe(false);
    expect(UpdateDatabaseBody.safeParse({ postgres_password: "x" }).success).toBe(false);
    expect(UpdateDatabaseBody.parse({ limits_memory: null })).toEqual({ limits_memory: null });
  });
});
