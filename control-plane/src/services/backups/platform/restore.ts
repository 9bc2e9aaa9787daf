import { existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { DatabaseConfig } from "../../../config.js";
import { openDatabase, type Prisma } from "../../../db/client.js";
import { migrate } from "../../../db/migrate.js";
import { ensurePrivateDir } from "../../../lib/private-files.js";
import { ArchiveError, KEY_FILE_NAME, readArchive, type ArchiveHeader, type FieldType } from "./archive.js";
import { databaseIsEmpty, fromPortable, modelTables, resetSequences } from "./database.js";
import { backupKeyPrefix, OPEN } from "../common.js";
import { knownMigrations } from "./export.js";
import { PLATFORM_BACKUP } from "./index.js";

export interface PlatformRestoreInput {
  /** Opens the archive from its start (called twice: the check, then the import). */
  open(): Promise<Readable>;
  passphrase: string | null;
  /**
   * The archive's file name (the last segment of its path or S3 key): the run of the snapshot
   * that wrote it, open in the snapshot, is recorded as the success it was (restore.ts).
   */
  archiveName?: string;
  dataDir: string;
  database: DatabaseConfig;
  progress?(line: string): void;
}

const BATCH = 100;

function checkHeader(header: ArchiveHeader, kind: DatabaseConfig["kind"]): void {
  const known = new Set(knownMigrations(kind));
  const unknown = header.migrations.filter((m) => !known.has(m));
  if (unknown.length) throw new ArchiveError(`the archive comes from a newer Capstan (migrations this version does not know: ${unknown.slice(0, 3).join(", ")}${unknown.length > 3 ? ", ..." : ""}); restore with that version or newer`);
}

/**
 * `capstan restore` (issue 19): a fresh instance from a platform_instance archive. Refuses a
 * data directory that is not empty (and a PostgreSQL database that has tables); reads the whole
 * archive once to check its manifest and (encrypted) every AEAD chunk before anything is
 * written; then migrates the new database, imports every table in one transaction (the archive
 * is checked again as it is read: any difference rolls it back) and writes the instance key.
 */
export async function restorePlatform(input: PlatformRestoreInput): Promise<{ tables: number; rows: number; header: ArchiveHeader }> {
  const progress = input.progress ?? (() => {});
  if (existsSync(input.dataDir) && readdirSync(input.dataDir).length) throw new ArchiveError(`the data directory ${input.dataDir} is not empty: restore into a new, empty directory`);
  if (!(await databaseIsEmpty(input.database))) throw new ArchiveError("the target PostgreSQL database already has tables: restore into a new, empty database");

  progress("checking the archive (manifest, sha256" + (input.passphrase ? ", AEAD" : "") + ")");
  // The stored archive's bytes (what its execution's size counts), counted as the check reads them.
  let archiveBytes = 0;
  const counted = (source: Readable) =>
    Readable.from(
      (async function* () {
        for await (const chunk of source as AsyncIterable<Buffer>) {
          archiveBytes += chunk.length;
          yield chunk;
        }
      })(),
    );
  const checked = await readArchive(counted(await input.open()), input.passphrase, (line) => {
    if (line.kind === "header") checkHeader(line.header, input.database.kind);
    if (line.kind === "file" && line.name === KEY_FILE_NAME && Buffer.from(line.data.toString("utf8").trim(), "base64").length !== 32) throw new ArchiveError("the archive's instance key is not a 32-byte key");
  });
  if (!(KEY_FILE_NAME in checked.manifest.files)) throw new ArchiveError("the archive holds no instance key");
  progress(`archive verified: ${Object.keys(checked.manifest.tables).length} tables, ${Object.values(checked.manifest.tables).reduce((a, b) => a + b, 0)} rows`);

  const createdDir = !existsSync(input.dataDir);
  ensurePrivateDir(input.dataDir);
  const found: { key: Buffer | null } = { key: null };
  let rows = 0;
  try {
    await migrate(input.database);
    const database = await openDatabase(input.database);
    try {
      const db = database.prisma;
      const specs = new Map(modelTables(db).map((t) => [t.table, new Map(t.fields)]));
      await db.$transaction(
        async (tx) => {
          let current: { table: string; fields: [string, FieldType][]; batch: Record<string, unknown>[] } | null = null;
          const flush = async () => {
            if (!current || !current.batch.length) return;
            const delegate = (tx as unknown as Record<string, { createMany(a: { data: unknown[] }): Promise<unknown> }>)[current.table[0]!.toLowerCase() + current.table.slice(1)]!;
            await delegate.createMany({ data: current.batch });
            rows += current.batch.length;
            current.batch = [];
          };
          await readArchive(await input.open(), input.passphrase, async (line) => {
            if (line.kind === "file" && line.name === KEY_FILE_NAME) found.key = line.data;
            if (line.kind === "table") {
              const known = specs.get(line.table);
              if (!known) throw new ArchiveError(`the archive has a table this version does not know: ${line.table}`);
              for (const [f, type] of line.fields) if (known.get(f) !== type) throw new ArchiveError(`${line.table}.${f} is not a ${type} field in this version`);
              current = { table: line.table, fields: line.fields, batch: [] };
            }
            if (line.kind === "row" && current) {
              const record: Record<string, unknown> = {};
              current.fields.forEach(([f, type], i) => (record[f] = fromPortable(type, line.values[i])));
              current.batch.push(record);
              if (current.batch.length >= BATCH) await flush();
            }
            if (line.kind === "end") {
              await flush();
              progress(`${line.table}: ${line.rows} rows`);
              current = null;
            }
          });
          await resetSequences(tx, input.database.kind, [...specs].map(([table, f]) => ({ table, fields: [...f] })));
          await endOpenPlatformRuns(tx, input.archiveName ?? null, archiveBytes);
          await tx.instanceSetting.deleteMany({ where: { key: { startsWith: "platform_backup_heartbeat:" } } });
        },
        { timeout: 6 * 3600_000, maxWait: 60_000 },
      );
    } finally {
      await database.close();
    }
    writeFileSync(join(input.dataDir, "secret.key"), found.key!, { mode: 0o600, flag: "wx" });
  } catch (err) {
    // Nothing half-restored stays behind in the data directory (a PostgreSQL target keeps its
    // migrated, empty tables: drop and re-create that database before trying again).
    if (createdDir) rmSync(input.dataDir, { recursive: true, force: true });
    else for (const f of readdirSync(input.dataDir)) rmSync(join(input.dataDir, f), { recursive: true, force: true });
    throw err;
  }
  return { tables: Object.keys(checked.manifest.tables).length, rows, header: checked.header };
}

/**
 * The platform backups that were running in the snapshot (the one that wrote this archive, and
 * any other running at that moment) cannot end on this instance. The run whose file this archive
 * is (its file name) did end, with this very archive: it is a success of the archive's size, kept
 * in S3 under its key when its schedule had a storage, not on this instance's disk. The others
 * are failed with the reason.
 */
async function endOpenPlatformRuns(tx: Prisma.TransactionClient, archiveName: string | null, archiveBytes: number): Promise<void> {
  const open = await tx.backupExecution.findMany({
    where: { status: { in: [...OPEN] }, schedule: { backupType: PLATFORM_BACKUP } },
    select: { id: true, filename: true, s3StorageId: true },
  });
  const now = new Date();
  for (const e of open) {
    if (archiveName !== null && e.filename === archiveName) {
      const storage = e.s3StorageId === null ? null : await tx.s3Storage.findUnique({ where: { id: e.s3StorageId }, select: { pathPrefix: true } });
      await tx.backupExecution.update({
        where: { id: e.id },
        data: { status: "success", size: BigInt(archiveBytes), localPath: null, s3Key: storage ? `${backupKeyPrefix(storage.pathPrefix, "platform-instance")}${e.filename}` : null, reason: null, finishedAt: now },
      });
    } else {
      await tx.backupExecution.update({ where: { id: e.id }, data: { status: "failed", reason: "this run was in progress in the snapshot this instance was restored from", finishedAt: now } });
    }
  }
}
