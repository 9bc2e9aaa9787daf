import { dirname } from "node:path";
import type { PrismaClient as GeneratedClient } from "./generated/sqlite/client.js";
import type { DatabaseConfig } from "../config.js";
import { openReader, type SqlReader } from "./reader.js";
import { postgresWriter, sqliteWriter, type PlainWriter } from "./plain-writer.js";
import { ensurePrivateDir, ensurePrivateSqlite } from "../lib/private-files.js";
import { scopeTransactionCallbacks, SerializedSqliteFactory } from "./sqlite-serial.js";

/**
 * The two generated clients share one model API (they come from one schema); the
 * SQLite client's type stands for both so services are written once.
 */
export type Db = InstanceType<typeof GeneratedClient>;
export type { Prisma } from "./generated/sqlite/client.js";

export interface Database {
  prisma: Db;
  kind: DatabaseConfig["kind"];
  /** Plain-SQL read path for the hot requests (reader.ts); writes go through prisma. */
  reader: SqlReader;
  /** Where the grouped statements of the job queue and of agents' hellos run (plain-writer.ts). */
  writer: PlainWriter;
  close(): Promise<void>;
}

/**
 * Time limits of every interactive transaction, both dialects. A transaction may wait its turn
 * behind others before it does anything: for an advisory lock on PostgreSQL (locks.ts), for the
 * one connection on SQLite (sqlite-serial.ts). Prisma's defaults (2 s to start, 5 s in all)
 * turned a burst of requests on one object on a loaded machine into 500s; these limits are
 * a guard against a hang, and a transaction that still passes them is answered 503 with
 * Retry-After (db/errors.ts "overloaded").
 */
export const TRANSACTION_LIMITS = { maxWait: 30_000, timeout: 60_000 } as const;

export async function openDatabase(config: DatabaseConfig): Promise<Database> {
  // Each dialect's client and adapter are loaded when used: a CLI command starts on one of them.
  if (config.kind === "sqlite") {
    const [{ PrismaBetterSqlite3 }, { PrismaClient: SqliteClient }] = await Promise.all([import("@prisma/adapter-better-sqlite3"), import("./generated/sqlite/client.js")]);
    ensurePrivateDir(dirname(config.file));
    ensurePrivateSqlite(config.file);
    // One connection: serialised so an open transaction is isolated from every other query
    // (sqlite-serial.ts, docs/database.md).
    const adapter = new SerializedSqliteFactory(new PrismaBetterSqlite3({ url: config.file, timeout: 10_000 }));
    const prisma = scopeTransactionCallbacks(new SqliteClient({ adapter, transactionOptions: TRANSACTION_LIMITS }), adapter.gate);
    // WAL is persistent in the file (set by the migrator); these two are per connection.
    await prisma.$executeRawUnsafe("PRAGMA synchronous = NORMAL");
    await prisma.$executeRawUnsafe("PRAGMA foreign_keys = ON");
    const reader = openReader(config);
    const writer = sqliteWriter(adapter);
    return { prisma, kind: "sqlite", reader, writer, close: () => closeAll(prisma, reader, writer) };
  }
  const [{ PrismaPg }, { PrismaClient: PostgresClient }] = await Promise.all([import("@prisma/adapter-pg"), import("./generated/postgresql/client.js")]);
  const prisma = new PostgresClient({
    adapter: new PrismaPg({ connectionString: config.url, max: 20 }),
    transactionOptions: TRANSACTION_LIMITS,
  }) as unknown as Db;
  await prisma.$queryRawUnsafe("SELECT 1");
  const reader = openReader(config);
  const writer = postgresWriter(config.url);
  return { prisma, kind: "postgresql", reader, writer, close: () => closeAll(prisma, reader, writer) };
}

async function closeAll(prisma: Db, reader: SqlReader, writer: PlainWriter): Promise<void> {
  try {
    await Promise.all([reader.close(), writer.close()]);
  } finally {
    await prisma.$disconnect();
  }
}
