import pg from "pg";

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
      return (await pool.query(sql, utc(params))).rowCount ?? 0;
    },
    async query<T extends object>(sql: string, params: readonly unknown[]) {
      return (await pool.query<T & pg.QueryResultRow>(sql, utc(params))).rows;
    },
    close: () => pool.end(),
  };
}
