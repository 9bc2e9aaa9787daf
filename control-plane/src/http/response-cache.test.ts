import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { SqlReader } from "../db/reader.js";
import { repoPath } from "../lib/paths.js";
import { ResponseCache, TEAM_VERSION_TRIGGERS } from "./response-cache.js";

const log = pino({ level: "silent" });

/** The trigger names the team_version migration of one engine creates. */
function migrationTriggers(dir: string): string[] {
  const name = readdirSync(repoPath(dir)).find((d) => d.endsWith("_team_version"));
  expect(name, `no *_team_version migration in ${dir}`).toBeDefined();
  const sql = readFileSync(join(repoPath(dir), name!, "migration.sql"), "utf8");
  return [...sql.matchAll(/CREATE TRIGGER "([^"]+)"/g)].map((m) => m[1]!);
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
