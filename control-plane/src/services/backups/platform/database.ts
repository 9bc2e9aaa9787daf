import Sqlite from "better-sqlite3";
import pg from "pg";
import type { DatabaseConfig } from "../../../config.js";
import type { Db } from "../../../db/client.js";
import { ArchiveError, FIELD_TYPES, type FieldType } from "./archive.js";

/**
 * The logical export and import of the whole database (issue 19): every model of the Prisma
 * schema (table = model name, column = field name: the schema maps none), parents before
 * children by the foreign keys the database itself declares, values in portable form
 * (archive.ts). The export reads one consistent snapshot on a connection of its own (SQLite: a
 * read transaction in WAL mode, PostgreSQL: REPEATABLE READ READ ONLY), so writers are never
 * blocked; the import writes through Prisma, so it works into either database.
 */
export interface TableSpec {
  table: string;
  fields: [string, FieldType][];
}

type RuntimeModel = { fields: { name: string; kind: string; type: string }[] };

/** The scalar fields of every model, from the generated client's runtime data model. */
export function modelTables(db: Db): TableSpec[] {
  const models = (db as unknown as { _runtimeDataModel?: { models: Record<string, RuntimeModel> } })._runtimeDataModel?.models;
  if (!models) throw new Error("the Prisma client exposes no runtime data model");
  return Object.entries(models).map(([table, m]) => {
    const fields = m.fields.filter((f) => f.kind === "scalar" || f.kind === "enum");
    for (const f of fields) if (!FIELD_TYPES.includes(f.type as FieldType)) throw new Error(`${table}.${f.name}: field type ${f.type} has no portable form`);
    return { table, fields: fields.map((f) => [f.name, f.type as FieldType] as [string, FieldType]) };
  });
}

/** Parents before children: a topological order of the tables by foreign keys (ties keep the schema's order). */
export function foreignKeyOrder(tables: TableSpec[], edges: { table: string; ref: string }[]): TableSpec[] {
  const names = new Set(tables.map((t) => t.table));
  const parents = new Map<string, Set<string>>(tables.map((t) => [t.table, new Set<string>()]));
  for (const e of edges) if (names.has(e.table) && names.has(e.ref) && e.table !== e.ref) parents.get(e.table)!.add(e.ref);
  const done = new Set<string>();
  const out: TableSpec[] = [];
  while (out.length < tables.length) {
    const next = tables.find((t) => !done.has(t.table) && [...parents.get(t.table)!].every((p) => done.has(p)));
    if (!next) throw new Error(`the foreign keys of ${tables.filter((t) => !done.has(t.table)).map((t) => t.table).join(", ")} form a cycle`);
    done.add(next.table);
    out.push(next);
  }
  return out;
}

/** The database's own foreign keys (child table -> parent table). */
export async function foreignKeyEdges(db: Db, kind: DatabaseConfig["kind"]): Promise<{ table: string; ref: string }[]> {
  if (kind === "sqlite") {
    return db.$queryRawUnsafe<{ table: string; ref: string }[]>(
      `SELECT m.name AS "table", p."table" AS ref FROM sqlite_master m, pragma_foreign_key_list(m.name) p WHERE m.type = 'table'`,
    );
  }
  return db.$queryRawUnsafe<{ table: string; ref: string }[]>(
    `SELECT cl.relname AS "table", fcl.relname AS ref FROM pg_constraint c
       JOIN pg_class cl ON c.conrelid = cl.oid JOIN pg_class fcl ON c.confrelid = fcl.oid
      WHERE c.contype = 'f' AND cl.relnamespace = current_schema()::regnamespace`,
  );
}

/** ISO 8601 UTC of a stored DateTime (SQLite: ISO text or epoch ms; PostgreSQL: timestamp(3) text, UTC). */
function isoOf(v: unknown): string {
  if (typeof v === "bigint" || typeof v === "number") return new Date(Number(v)).toISOString();
  const s = String(v);
  const d = new Date(/[zZ]|[+-]\d\d:?\d\d$/.test(s) ? s : s.replace(" ", "T") + "Z");
  if (Number.isNaN(d.getTime())) throw new Error(`unreadable date ${s}`);
  return d.toISOString();
}

/** A stored value in its portable form. */
export function portable(type: FieldType, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  switch (type) {
    case "Int":
      return Number(v);
    case "BigInt":
      return String(v);
    case "Boolean":
      return v === true || v === 1 || v === 1n || v === "t" || v === "true";
    case "DateTime":
      return isoOf(v);
    case "String":
      return String(v);
  }
}

/** A portable value as Prisma takes it. */
export function fromPortable(type: FieldType, v: unknown): unknown {
  if (v === null) return null;
  switch (type) {
    case "Int":
      if (typeof v !== "number" || !Number.isInteger(v)) throw new ArchiveError(`not an integer: ${JSON.stringify(v)}`);
      return v;
    case "BigInt":
      if (typeof v !== "string" || !/^-?\d+$/.test(v)) throw new ArchiveError(`not a big integer: ${JSON.stringify(v)}`);
      return BigInt(v);
    case "Boolean":
      if (typeof v !== "boolean") throw new ArchiveError(`not a boolean: ${JSON.stringify(v)}`);
      return v;
    case "DateTime": {
      const d = new Date(String(v));
      if (typeof v !== "string" || Number.isNaN(d.getTime())) throw new ArchiveError(`not a date: ${JSON.stringify(v)}`);
      return d;
    }
    case "String":
      if (typeof v !== "string") throw new ArchiveError(`not a string: ${JSON.stringify(v)}`);
      return v;
  }
}

const PAGE = 1000;
const q = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** One snapshot of the database, read table by table (rows in portable form). */
export interface Snapshot {
  rows(spec: TableSpec): AsyncGenerator<unknown[]>;
  close(): Promise<void>;
}

export async function openSnapshot(config: DatabaseConfig): Promise<Snapshot> {
  if (config.kind === "sqlite") {
    const conn = new Sqlite(config.file, { readonly: true, fileMustExist: true });
    conn.pragma("busy_timeout = 10000");
    // WAL: a read transaction sees the database as of its first read, whatever is written meanwhile.
    conn.prepare("BEGIN").run();
    conn.prepare("SELECT 1 FROM sqlite_master LIMIT 1").get();
    return {
      async *rows(spec) {
        const stmt = conn.prepare(`SELECT ${spec.fields.map(([f]) => q(f)).join(", ")} FROM ${q(spec.table)}`).raw(true).safeIntegers(true);
        let n = 0;
        for (const row of stmt.iterate() as Iterable<unknown[]>) {
          yield row.map((v, i) => portable(spec.fields[i]![1], v));
          // Lets the event loop breathe on big tables (the iterator is synchronous).
          if (++n % PAGE === 0) await new Promise((r) => setImmediate(r));
        }
      },
      async close() {
        try {
          conn.prepare("COMMIT").run();
        } finally {
          conn.close();
        }
      },
    };
  }
  const raw = (v: string) => v;
  const client = new pg.Client({
    connectionString: config.url,
    // timestamps and int8 as the server's text: no local-time or precision surprises.
    types: { getTypeParser: ((oid: number, format?: string) => (oid === 1114 || oid === 1184 || oid === 20 ? raw : pg.types.getTypeParser(oid, format as never))) as never },
  });
  await client.connect();
  await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  return {
    async *rows(spec) {
      const columns = spec.fields.map(([f]) => q(f)).join(", ");
      const hasId = spec.fields.some(([f]) => f === "id");
      const order = hasId ? q("id") : spec.fields.map(([f]) => q(f)).join(", ");
      for (let offset = 0; ; offset += PAGE) {
        const r = await client.query({ text: `SELECT ${columns} FROM ${q(spec.table)} ORDER BY ${order} LIMIT ${PAGE} OFFSET ${offset}`, rowMode: "array" });
        for (const row of r.rows as unknown[][]) yield row.map((v, i) => portable(spec.fields[i]![1], v));
        if (r.rows.length < PAGE) return;
      }
    },
    async close() {
      try {
        await client.query("COMMIT");
      } finally {
        await client.end();
      }
    },
  };
}

/** Whether a database holds no Capstan table yet (a restore's target must be empty). */
export async function databaseIsEmpty(config: DatabaseConfig): Promise<boolean> {
  if (config.kind === "sqlite") return true; // its file lives in the data directory, checked empty
  const client = new pg.Client({ connectionString: config.url });
  await client.connect();
  try {
    const r = await client.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = current_schema()`);
    return (r.rows[0] as { n: number }).n === 0;
  } finally {
    await client.end();
  }
}

/** After an import on PostgreSQL: each id sequence continues after the highest id restored. */
export async function resetSequences(tx: Pick<Db, "$queryRawUnsafe">, kind: DatabaseConfig["kind"], tables: TableSpec[]): Promise<void> {
  if (kind !== "postgresql") return; // SQLite's AUTOINCREMENT follows explicit ids by itself
  for (const t of tables) {
    if (!t.fields.some(([f, type]) => f === "id" && type === "Int")) continue;
    await tx.$queryRawUnsafe(
      `SELECT setval(pg_get_serial_sequence('${q(t.table)}', 'id'), m) FROM (SELECT MAX("id") AS m FROM ${q(t.table)}) s WHERE m IS NOT NULL AND pg_get_serial_sequence('${q(t.table)}', 'id') IS NOT NULL`,
    );
  }
}
