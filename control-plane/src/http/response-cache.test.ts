import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { SqlReader } from "../db/reader.js";
import { repoPath } from "../lib/paths.js";
import { ResponseCache, TEAM_VERSION_TRIGGERS } from "./response-cache.js";

const log = pino({ level: "silent" });

/** The trigger names the team_version migrations of one engine create (*_team_version, *_team_version_resources). */
function migrationTriggers(dir: string): string[] {
  const names = readdirSync(repoPath(dir)).filter((d) => /_team_version(_|$)/.test(d));
  expect(names.length, `no *_team_version migration in ${dir}`).toBeGreaterThan(0);
  return names.flatMap((name) => {
    const sql = readFileSync(join(repoPath(dir), name, "migration.sql"), "utf8");
    return [...sql.matchAll(/CREATE TRIGGER "([^"]+)"/g)].map((m) => m[1]!);
  });
}

/**
 * The TeamVersion triggers in the database once every migration of the engine has run, replayed
 * statement by statement: a trigger lives from its CREATE TRIGGER until a DROP TRIGGER of it or a
 * DROP TABLE of its table (SQLite and PostgreSQL drop a table's triggers with it, as Prisma's
 * "new_<Table>" redefinitions do). A migration that rebuilds a watched table without creating its
 * triggers again would leave the response cache off at start.
 */
function triggersAfterAllMigrations(dir: string): string[] {
  const live = new Map<string, string>(); // trigger -> table
  for (const name of readdirSync(repoPath(dir)).filter((d) => /^\d+_/.test(d)).sort()) {
    const sql = readFileSync(join(repoPath(dir), name, "migration.sql"), "utf8").replace(/--[^\n]*/g, "");
    const events = [
      ...[...sql.matchAll(/CREATE TRIGGER "([^"]+)"[\s\S]*?\bON "([^"]+)"/g)].map((m) => ({ at: m.index, kind: "create" as const, name: m[1]!, table: m[2]! })),
      ...[...sql.matchAll(/DROP TRIGGER (?:IF EXISTS )?"([^"]+)"/g)].map((m) => ({ at: m.index, kind: "drop" as const, name: m[1]!, table: "" })),
      ...[...sql.matchAll(/DROP TABLE (?:IF EXISTS )?"([^"]+)"/g)].map((m) => ({ at: m.index, kind: "table" as const, name: "", table: m[1]! })),
    ].sort((a, b) => a.at - b.at);
    for (const e of events) {
      if (e.kind === "create") live.set(e.name, e.table);
      else if (e.kind === "drop") live.delete(e.name);
      else for (const [trigger, table] of live) if (table === e.table) live.delete(trigger);
    }
  }
  return [...live.keys()].filter((t) => t.startsWith("TeamVersion"));
}

function reader(kind: SqlReader["kind"], triggers: string[] | Error): SqlReader {
  return {
    kind,
    async all<T extends object>() {
      if (triggers instanceof Error) throw triggers;
      return triggers.map((name) => ({ name })) as unknown as T[];
    },
    async rows<T extends unknown[]>() {
      return [] as T[];
    },
    async close() {},
  };
}

async function started(maxBytes = 10_000, kind: SqlReader["kind"] = "sqlite") {
  const cache = new ResponseCache(reader(kind, [...TEAM_VERSION_TRIGGERS[kind]]), log, maxBytes);
  await cache.ready;
  return cache;
}

const body = (n: number) => Buffer.alloc(n, "x");

describe("ResponseCache", () => {
  it("expects exactly the triggers each engine's migration creates", () => {
    expect([...TEAM_VERSION_TRIGGERS.sqlite].sort()).toEqual(migrationTriggers("prisma/migrations").sort());
    expect([...TEAM_VERSION_TRIGGERS.postgresql].sort()).toEqual(migrationTriggers("prisma/postgresql/migrations").sort());
  });

  it("no later migration drops a TeamVersion trigger for good (a table rebuilt without them)", () => {
    expect(triggersAfterAllMigrations("prisma/migrations").sort()).toEqual([...TEAM_VERSION_TRIGGERS.sqlite].sort());
    expect(triggersAfterAllMigrations("prisma/postgresql/migrations").sort()).toEqual([...TEAM_VERSION_TRIGGERS.postgresql].sort());
  });

  it("turns on only when every trigger is there", async () => {
    for (const kind of ["sqlite", "postgresql"] as const) {
      expect((await started(1000, kind)).active).toBe(true);
      const all = [...TEAM_VERSION_TRIGGERS[kind]];
      const missing = new ResponseCache(reader(kind, all.slice(1)), log, 1000);
      expect(missing.active).toBe(false); // still checking
      await missing.ready;
      expect(missing.stats().state).toBe("off");
      expect(missing.active).toBe(false);
    }
    const failing = new ResponseCache(reader("sqlite", new Error("database is locked")), log, 1000);
    await failing.ready;
    expect(failing.stats().state).toBe("off");
  });

  it("answers only for the version a body was stored at, and forgets the body on a mismatch", async () => {
    const cache = await started();
    cache.set("k", 7, body(10), 'W/"a"');
    expect(cache.get("k", 7)).toMatchObject({ version: 7, etag: 'W/"a"' });
    expect(cache.get("k", 8)).toBeUndefined();
    expect(cache.get("k", 7)).toBeUndefined(); // dropped, not kept for an older reader
    expect(cache.stats()).toMatchObject({ hits: 1, misses: 2, entries: 0, bytes: 0 });
  });

  it("stays within its byte budget, evicting the least recently used body first", async () => {
    const cache = await started(4_000);
    for (const k of ["a", "b", "c"]) cache.set(k, 1, body(900), undefined);
    expect(cache.get("a", 1)).toBeDefined(); // a is now the most recently used
    cache.set("d", 1, body(900), undefined);
    cache.set("e", 1, body(900), undefined);
    expect(cache.stats().bytes).toBeLessThanOrEqual(4_000);
    expect(cache.get("b", 1)).toBeUndefined();
    for (const k of ["a", "d", "e"]) expect(cache.get(k, 1), k).toBeDefined();
    // Replacing a key does not count it twice; a body over a quarter of the budget is not kept.
    cache.set("a", 2, body(900), undefined);
    expect(cache.stats().entries).toBeLessThanOrEqual(4);
    cache.set("big", 1, body(1_100), undefined);
    expect(cache.get("big", 1)).toBeUndefined();
  });
});
