import pg from "pg";
import type Sqlite from "better-sqlite3";
import { pgTypes } from "./reader.js";
import type { SqliteConnection } from "./sqlite-serial.js";

/**
 * Where the job queue's grouped statements run (jobs/sql.ts: the rows, outcomes and marks of
 * many jobs in one statement, autocommit, outside any transaction). On PostgreSQL through the
 * pg driver directly: through Prisma's raw query path each such statement cost about 1 ms of
 * CPU for its parameters (bench/fleet, 10 % of the control plane's CPU while it runs jobs). On
 * SQLite through Prisma, whose one serialised connection every write must share.
 */
export interface PlainWriter {
  /** Runs a statement; the number of rows it changed. */
  execute(sql: string, params: readonly unknown[]): Promise<number>;
  /** Runs a statement with RETURNING; its rows. */
  query<T extends object>(sql: string, params: readonly unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

/** The part of a Prisma client prismaWriter uses (client.ts imports this file). */
interface RawQueries {
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
  $queryRawUnsafe<T = unknown>(sql: string, ...values: unknown[]): Promise<T>;
}

export function prismaWriter(prisma: RawQueries): PlainWriter {
  return {
    execute: (sql, params) => prisma.$executeRawUnsafe(sql, ...params),
    query: <T extends object>(sql: string, params: readonly unknown[]) => prisma.$queryRawUnsafe<T[]>(sql, ...params),
    close: async () => {},
  };
}

/** How the serialised adapter lends its connection (sqlite-serial.ts SerializedSqliteFactory). */
export interface SqliteLender {
  direct<T>(sql: string, run: (connection: SqliteConnection) => T): Promise<T>;
}

/** Prepared statements kept; beyond, the cache starts again (texts vary with their row counts). */
const KEPT_STATEMENTS = 1000;

/**
 * Values as Prisma's SQLite adapter binds them, so rows written either way read the same:
 * a Date as ISO text with "+00:00", a boolean as 0/1.
 */
const sqliteValue = (v: unknown) => (v instanceof Date ? v.toISOString().replace("Z", "+00:00") : typeof v === "boolean" ? (v ? 1 : 0) : v);

export function sqliteWriter(lender: SqliteLender): PlainWriter {
  const statements = new Map<string, Sqlite.Statement>();
  const statement = (connection: SqliteConnection, sql: string) => {
    let stmt = statements.get(sql);
    if (!stmt) {
      if (statements.size >= KEPT_STATEMENTS) statements.clear();
      // Integers as numbers: the adapter turned BigInt on for its connection.
      stmt = connection.prepare(sql).safeIntegers(false);
      statements.set(sql, stmt);
    }
    return stmt;
  };
  return {
    execute: (sql, params) => lender.direct(sql, (c) => statement(c, sql).run(...params.map(sqliteValue)).changes),
    query: <T extends object>(sql: string, params: readonly unknown[]) => lender.direct(sql, (c) => statement(c, sql).all(...params.map(sqliteValue)) as T[]),
    close: async () => statements.clear(),
  };
}

/**
 * Dates go as ISO text in UTC: the columns are timestamp(3) without time zone holding UTC (as
 * Prisma writes them), and pg's own conversion would write the machine's local time.
 */
const utc = (params: readonly unknown[]) => params.map((p) => (p instanceof Date ? p.toISOString() : p));

export function postgresWriter(url: string): PlainWriter {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on("error", () => {}); // an idle client that died; the pool replaces it
  return {
    async execute(sql, params) {
      return (await pool.query({ text: sql, values: utc(params), types: pgTypes })).rowCount ?? 0;
    },
    async query<T extends object>(sql: string, params: readonly unknown[]) {
      return (await pool.query<T & pg.QueryResultRow>({ text: sql, values: utc(params), types: pgTypes })).rows;
    },
    close: () => pool.end(),
  };
}
