import type { DatabaseConfig } from "../../../config.js";
import type { Db } from "../../../db/client.js";
import { loadMigrations, migrationsDir } from "../../../db/migrate.js";
import { ArchiveWriter, KEY_FILE_NAME } from "./archive.js";
import { foreignKeyEdges, foreignKeyOrder, modelTables, openSnapshot } from "./database.js";

/** The migrations this build knows for a database kind (an archive records them; a restore refuses newer ones). */
export const knownMigrations = (kind: DatabaseConfig["kind"]): string[] => loadMigrations(migrationsDir(kind)).map((m) => m.name);

/**
 * The bytes of one platform archive, before compression (archive.ts): header, the instance key,
 * every table in foreign-key order from one snapshot, the manifest. A generator: the caller's
 * pipeline pulls it, so memory stays flat whatever the size of the database.
 */
export async function* platformArchive(db: Db, database: DatabaseConfig, instanceKey: Buffer, at: Date): AsyncGenerator<Buffer> {
  const tables = foreignKeyOrder(modelTables(db), await foreignKeyEdges(db, database.kind));
  const w = new ArchiveWriter();
  const snapshot = await openSnapshot(database);
  try {
    yield w.header({ created_at: at.toISOString(), source: database.kind, migrations: knownMigrations(database.kind) });
    yield w.file(KEY_FILE_NAME, Buffer.from(instanceKey.toString("base64") + "\n"));
    for (const spec of tables) {
      yield w.table(spec.table, spec.fields);
      for await (const row of snapshot.rows(spec)) yield w.row(spec.table, row);
      yield w.end(spec.table);
    }
    yield w.manifest();
  } finally {
    await snapshot.close();
  }
}
