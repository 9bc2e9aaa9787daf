import Sqlite from "better-sqlite3";
import pg from "pg";
import type { DatabaseConfig } from "../config.js";

/**
 * A lean read path for the hottest requests (token lookup, project reads): plain SQL with
 * statements prepared once, without Prisma's per-query planning and per-row mapping.
 *
 * - Read-only: the SQLite connection is `query_only`; writes stay with Prisma.
 * - No cache of results: every call reads the database, so a write committed by another
 *   process (the `capstan` CLI, another replica) is seen by the next request.
 * - One SQL text for both engines: `?` placeholders (numbered for PostgreSQL here) and
 *   double-quoted identifiers. Values come back as the driver gives them: use `toDate`,
 *   `toInt` to normalise (SQLite stores Prisma DateTimes as ISO text, PostgreSQL as
 *   timestamp(3) without time zone, in UTC; COUNT is a bigint string on PostgreSQL).
 * - Outside Prisma's transactions: use it only where a request reads committed data.
 */
export interface SqlReader {
  readonly kind: DatabaseConfig["kind"];
  /** Rows as objects keyed by column name (alias every computed column). */
  all<T extends object>(sql: string, params: readonly (string | number)[]): Promise<T[]>;
  /** Rows as arrays in select-list order: cheaper per row, for long lists. */
  rows<T extends unknown[]>(sql: string, params: readonly (string | number)[]): Promise<T[]>;
  close(): Promise<void>;
}

/** A page of a list: `skip` rows left out, at most `take` rows (none given: the whole list). */
export type Window = { skip?: number; take?: number };

/**
 * The page window of a list statement through this path: ` LIMIT ? OFFSET ?` with its two
 * values appended to `params`, or nothing for the whole list. Append it after ORDER BY.
 */
export function pageSql(window: Window, params: (string | number)[]): string {
  if (window.take === undefined) return "";
  params.push(window.take, window.skip ?? 0);
  return ` LIMIT ? OFFSET ?`;
}

/**
 * The list statement of a resource placed in an environment on a server (applications,
 * databases, services: `table` aliased `alias`), with its environment `e`, project `p` and
 * server `s` joined for `columns`: the rows `where` admits, by id, one page (pageSql).
 */
export function placedListSql(table: string, alias: string, columns: string, where: string, window: Window, params: (string | number)[]): string {
  return `SELECT ${columns}
      FROM "${table}" ${alias}
      JOIN "Environment" e ON e."id" = ${alias}."environmentId"
      JOIN "Project" p ON p."id" = e."projectId"
      JOIN "Server" s ON s."id" = ${alias}."serverId"
      WHERE ${where} ORDER BY ${alias}."id"${pageSql(window, params)}`;
}

/** The longest list for paddedIn (a power of two, with room for a few other parameters under 999). */
export const PADDED_IN_MAX = 512;

/**
 * The values of an `IN (...)` list padded to a power of two with a value that matches nothing,
 * so a read through this path (statements prepared once per SQL text, and kept) has at most a
 * dozen texts to prepare however the lists vary; with `?` placeholders for them. Lists go in
 * chunks of at most PADDED_IN_MAX: padded, a longer one could pass SQLite's 999 bound values.
 */
export function paddedIn<T>(values: readonly T[], filler: T): { list: string; values: T[] } {
  let size = 1;
  while (size < values.length) size *= 2;
  const padded = [...values, ...Array.from({ length: size - values.length }, () => filler)];
  return { list: padded.map(() => "?").join(", "), values: padded };
}

export function openReader(config: DatabaseConfig): SqlReader {
  return config.kind === "sqlite" ? sqliteReader(config.file) : postgresReader(config.url);
}

function sqliteReader(file: string): SqlReader {
  const db = new Sqlite(file, { timeout: 10_000, fileMustExist: true });
  db.pragma("query_only = ON");
  const objects = new Map<string, Sqlite.Statement>();
  const arrays = new Map<string, Sqlite.Statement>();
  const statement = (cache: Map<string, Sqlite.Statement>, sql: string, raw: boolean) => {
    let stmt = cache.get(sql);
    if (!stmt) {
      stmt = db.prepare(sql);
      if (!stmt.reader) throw new Error("SqlReader runs read statements only");
      stmt.raw(raw);
      cache.set(sql, stmt);
    }
    return stmt;
  };
  return {
    kind: "sqlite",
    async all<T extends object>(sql: string, params: readonly (string | number)[]) {
      return statement(objects, sql, false).all(...params) as T[];
    },
    async rows<T extends unknown[]>(sql: string, params: readonly (string | number)[]) {
      return statement(arrays, sql, true).all(...params) as T[];
    },
    async close() {
      objects.clear();
      arrays.clear();
      db.close();
    },
  };
}

// timestamp(3) without time zone holds UTC (Prisma writes UTC): parse it as UTC, not as
// local time (pg's default). bigint (COUNT) as a number.
const TIMESTAMP = 1114;
const INT8 = 20;
export const pgTypes = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === TIMESTAMP) return (v: string) => new Date(v.replace(" ", "T") + "Z");
    if (oid === INT8) return (v: string) => Number(v);
    return format === "binary" ? pg.types.getTypeParser(oid, "binary") : pg.types.getTypeParser(oid, "text");
  },
} as pg.CustomTypesConfig;

function postgresReader(url: string): SqlReader {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  pool.on("error", () => {}); // an idle client that died; the pool replaces it
  const texts = new Map<string, { name: string; text: string }>();
  const query = (sql: string) => {
    let q = texts.get(sql);
    if (!q) {
      let n = 0;
      q = { name: `capstan_r${texts.size}`, text: sql.replace(/\?/g, () => `$${++n}`) };
      texts.set(sql, q);
    }
    return q;
  };
  return {
    kind: "postgresql",
    async all<T extends object>(sql: string, params: readonly (string | number)[]) {
      const res = await pool.query<T & pg.QueryResultRow>({ ...query(sql), values: [...params], types: pgTypes });
      return res.rows;
    },
    async rows<T extends unknown[]>(sql: string, params: readonly (string | number)[]) {
      const res = await pool.query<T & unknown[]>({ ...query(sql), values: [...params], types: pgTypes, rowMode: "array" });
      return res.rows;
    },
    close: () => pool.end(),
  };
}

/** A Prisma DateTime column as read by either driver. */
export function toDate(v: unknown): Date {
  if (v instanceof Date) return v;
  if (typeof v === "number") return new Date(v);
  const s = String(v);
  // CURRENT_TIMESTAMP defaults (a row not written through Prisma): "YYYY-MM-DD HH:MM:SS", UTC.
  return new Date(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?$/.test(s) ? s.replace(" ", "T") + "Z" : s);
}

/**
 * A Prisma DateTime column as ISO 8601 in UTC with milliseconds (what Date#toISOString gives).
 * Prisma's SQLite adapter writes exactly `toISOString()` with "+00:00" for "Z": that case is
 * a string edit, which for a long list is far cheaper than parsing a Date.
 */
export function toIso(v: unknown): string {
  if (typeof v === "string" && v.length === 29 && v.charCodeAt(10) === 84 /* T */ && v.endsWith("+00:00") && v.charCodeAt(19) === 46 /* . */) {
    return v.slice(0, 23) + "Z";
  }
  return toDate(v).toISOString();
}

export const toInt = (v: unknown): number => (typeof v === "number" ? v : Number(v));
