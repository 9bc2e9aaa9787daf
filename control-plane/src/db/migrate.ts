import { createHash, randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import type { DatabaseConfig } from "../config.js";
import { repoPath } from "../lib/paths.js";
import { ensurePrivateDir, ensurePrivateSqlite } from "../lib/private-files.js";

/**
 * Applies Prisma-format migrations (prisma/migrations for SQLite,
 * prisma/postgresql/migrations for PostgreSQL) and records them in Prisma's own
 * `_prisma_migrations` table with Prisma's checksum, so `prisma migrate deploy` and this
 * runner agree on what is applied. Prisma's CLI needs a native engine it downloads at run
 * time; this runner needs nothing but the driver, so first start works offline.
 */
export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export function migrationsDir(kind: DatabaseConfig["kind"]): string {
  return repoPath(kind === "sqlite" ? "prisma/migrations" : "prisma/postgresql/migrations");
}

export function loadMigrations(dir: string): Migration[] {
  if (!existsSync(dir)) throw new Error(`migrations folder not found: ${dir}`);
  return readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort()
    .map((name) => {
      const sql = readFileSync(join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    });
}

export class MigrationError extends Error {}

function checkHistory(applied: Map<string, string>, migrations: Migration[]): Migration[] {
  for (const [name, checksum] of applied) {
    const m = migrations.find((x) => x.name === name);
    if (!m) throw new MigrationError(`database has migration ${name} that this release does not know; is this an older release?`);
    if (m.checksum !== checksum) throw new MigrationError(`migration ${name} was modified after it was applied`);
  }
  return migrations.filter((m) => !applied.has(m.name));
}

/** Returns the names of the migrations it applied. */
export async function migrate(config: DatabaseConfig): Promise<string[]> {
  const migrations = loadMigrations(migrationsDir(config.kind));
  return config.kind === "sqlite" ? migrateSqlite(config.file, migrations) : migratePostgres(config.url, migrations);
}

function migrateSqlite(file: string, migrations: Migration[]): string[] {
  // The first to open the database: it is created here, private (lib/private-files.ts).
  ensurePrivateDir(dirname(file));
  ensurePrivateSqlite(file);
  const db = new Database(file, { timeout: 30_000 });
  try {
    db.pragma("journal_mode = WAL");
    db.exec(`CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
      "id" TEXT PRIMARY KEY NOT NULL, "checksum" TEXT NOT NULL, "finished_at" DATETIME,
      "migration_name" TEXT NOT NULL, "logs" TEXT, "rolled_back_at" DATETIME,
      "started_at" DATETIME NOT NULL DEFAULT current_timestamp,
      "applied_steps_count" INTEGER UNSIGNED NOT NULL DEFAULT 0)`);
    // IMMEDIATE takes the write lock up front: two processes starting at once serialize here.
    const run = db.transaction(() => {
      const rows = db
        .prepare(`SELECT migration_name, checksum FROM "_prisma_migrations" WHERE rolled_back_at IS NULL AND finished_at IS NOT NULL`)
        .all() as { migration_name: string; checksum: string }[];
      const pending = checkHistory(new Map(rows.map((r) => [r.migration_name, r.checksum])), migrations);
      for (const m of pending) {
        db.exec(m.sql);
        db.prepare(
          `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, started_at, applied_steps_count)
           VALUES (?, ?, current_timestamp, ?, current_timestamp, 1)`,
        ).run(randomUUID(), m.checksum, m.name);
      }
      return pending.map((m) => m.name);
    });
    return run.immediate();
  } finally {
    db.close();
  }
}

/** Same number Prisma uses for its migrate lock, so both never run at once. */
const ADVISORY_LOCK_ID = 72707369;

async function migratePostgres(url: string, migrations: Migration[]): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1)", [ADVISORY_LOCK_ID]);
    await client.query(`CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
      "id" VARCHAR(36) PRIMARY KEY NOT NULL, "checksum" VARCHAR(64) NOT NULL,
      "finished_at" TIMESTAMPTZ, "migration_name" VARCHAR(255) NOT NULL, "logs" TEXT,
      "rolled_back_at" TIMESTAMPTZ, "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
      "applied_steps_count" INTEGER NOT NULL DEFAULT 0)`);
    const { rows } = await client.query<{ migration_name: string; checksum: string }>(
      `SELECT migration_name, checksum FROM "_prisma_migrations" WHERE rolled_back_at IS NULL AND finished_at IS NOT NULL`,
    );
    const pending = checkHistory(new Map(rows.map((r) => [r.migration_name, r.checksum])), migrations);
    for (const m of pending) {
      await client.query("BEGIN");
      try {
        await client.query(m.sql);
        await client.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, started_at, applied_steps_count)
           VALUES ($1, $2, now(), $3, now(), 1)`,
          [randomUUID(), m.checksum, m.name],
        );
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK");
        throw new MigrationError(`migration ${m.name} failed: ${(err as Error).message}`);
      }
    }
    return pending.map((m) => m.name);
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [ADVISORY_LOCK_ID]).catch(() => {});
    await client.end();
  }
}
