// What-if measurements for the fixes bench/api/README.md proposes. Each one patches a library
// or the Prisma client IN THE BENCH PROCESS ONLY, so its gain can be measured before anyone
// changes the product code. Enabled with BENCH_EXPERIMENTS=stmt-cache,token-cache,memory-limit,project-index.
import Sqlite from "better-sqlite3";
import { RateLimiterMemory, RateLimiterSQLite } from "rate-limiter-flexible";

export const EXPERIMENTS = {
  "stmt-cache": "better-sqlite3 statements prepared once per SQL text (the Prisma adapter prepares on every query)",
  "token-cache": "API token lookups cached in memory for 5 s (auth.ts runs 3 SELECTs per request)",
  "memory-limit": "rate limit counted in memory instead of one SQLite write per request",
  "project-index": "an index on Project(teamId, id), so a page ordered by id needs no sort of all the team's projects",
} as const;
export type Experiment = keyof typeof EXPERIMENTS;

type Stmt = {
  reader: boolean;
  columns(): unknown[];
  raw(on?: boolean): Stmt;
  all(...a: unknown[]): unknown[];
  get(...a: unknown[]): unknown;
  run(...a: unknown[]): unknown;
};

/** Patches that must be in place before the instance is created. */
export function applyBeforeStart(names: Experiment[]): void {
  if (names.includes("stmt-cache")) {
    const proto = Sqlite.prototype as unknown as { prepare(sql: string): Stmt };
    const prepare = proto.prepare;
    const caches = new WeakMap<object, Map<string, Stmt>>();
    proto.prepare = function (this: object, sql: string) {
      let cache = caches.get(this);
      if (!cache) caches.set(this, (cache = new Map()));
      let s = cache.get(sql);
      if (!s) cache.set(sql, (s = prepare.call(this, sql)));
      const stmt = s;
      // The adapter calls prepare(sql).bind(args), which better-sqlite3 makes permanent;
      // hand out a bound view instead so the statement can be reused.
      return new Proxy(stmt, {
        get(target, prop) {
          if (prop === "bind") {
            return (args: unknown[]) => ({
              reader: target.reader,
              columns: () => target.columns(),
              raw: (on = true) => ({ all: () => target.raw(on).all(args), get: () => target.raw(on).get(args) }),
              all: () => target.raw(false).all(args),
              get: () => target.raw(false).get(args),
              run: () => target.run(args),
            });
          }
          const v = (target as unknown as Record<string | symbol, unknown>)[prop];
          return typeof v === "function" ? v.bind(target) : v;
        },
      });
    } as typeof proto.prepare;
  }
  if (names.includes("memory-limit")) {
    const memory = new WeakMap<object, RateLimiterMemory>();
    const proto = RateLimiterSQLite.prototype as unknown as {
      consume(key: string, points?: number, options?: object): Promise<unknown>;
      points: number;
      duration: number;
    };
    proto.consume = function (this: typeof proto, key, points = 1, options = {}) {
      let m = memory.get(this);
      if (!m) memory.set(this, (m = new RateLimiterMemory({ points: this.points, duration: this.duration })));
      return m.consume(key, points, options);
    };
  }
}

/** Patches on the live Prisma client and database. */
export async function applyAfterStart(names: Experiment[], db: unknown): Promise<void> {
  if (names.includes("project-index")) {
    await (db as { $executeRawUnsafe(sql: string): Promise<unknown> }).$executeRawUnsafe(
      `CREATE INDEX IF NOT EXISTS "Project_teamId_id_idx" ON "Project"("teamId", "id")`,
    );
  }
  if (names.includes("token-cache")) {
    const delegate = (db as { apiToken: { findUnique(args: { where: { secretHash?: string } }): Promise<unknown> } }).apiToken;
    const findUnique = delegate.findUnique.bind(delegate);
    const cache = new Map<string, { at: number; row: Promise<unknown> }>();
    delegate.findUnique = (args) => {
      const hash = args.where.secretHash;
      if (!hash) return findUnique(args);
      const hit = cache.get(hash);
      if (hit && Date.now() - hit.at < 5_000) return hit.row;
      const row = findUnique(args);
      cache.set(hash, { at: Date.now(), row });
      return row;
    };
  }
}

export function parseExperiments(raw: string | undefined): Experiment[] {
  const names = (raw ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  for (const n of names) if (!(n in EXPERIMENTS)) throw new Error(`unknown experiment ${n}; use ${Object.keys(EXPERIMENTS).join(", ")}`);
  return names as Experiment[];
}
