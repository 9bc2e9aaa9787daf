import { Readable } from "node:stream";
import type { DbCredentials } from "@capstan/shared";
import type { ExecSpec } from "../../docker/engine.js";
import { BackupToolError, execCollect, execFeed, toolFailure, type DumpSource } from "../exec.js";
import { readTar, TAR_END, tarHeader, tarPadding, type TarEntry } from "../tar.js";
import type { BackupDriver, DbTarget } from "./types.js";

/**
 * ClickHouse: a logical dump of the one database made with clickhouse-client only (no server
 * configuration needed, unlike BACKUP ... TO Disk, and it works on old servers too), written as
 * a tar stream (the `native.tar` of the file name):
 *
 *   manifest.json                      {format, database, tables: [{dir, name, engine, data}]}
 *   tables/0001/schema.sql             SHOW CREATE TABLE of each table and view
 *   tables/0001/data-000001.native     SELECT * ... FORMAT Native, cut into parts of at most 8 MiB
 *
 * Tables come first (each with its data), views after them, so that restoring a materialized
 * view cannot fire on the restored rows. The parts of a table concatenated are its Native
 * stream (`cat tables/0001/data-* | clickhouse-client -q "INSERT INTO t FORMAT Native"` by hand).
 * Restore: CREATE DATABASE IF NOT EXISTS, then per table DROP TABLE IF EXISTS + its CREATE, its
 * parts streamed into one INSERT ... FORMAT Native. Memory: one part buffer (8 MiB).
 * Not covered: the data of materialized views' implicit inner tables (recreated empty: they fill
 * from new inserts), dictionaries' sources, users and grants (access management).
 * The password goes in CLICKHOUSE_PASSWORD (the exec's environment), which clickhouse-client
 * reads since 22.3.
 */
const FORMAT = "capstan-clickhouse-native/1";
const PART_BYTES = 8 * 1024 * 1024;
const MAX_TEXT_ENTRY = 4 * 1024 * 1024;
const DATA_ENGINES = /^(.*MergeTree|Log|TinyLog|StripeLog|Memory)$/;
const VIEW_ENGINES = /^(View|MaterializedView|LiveView|WindowView|Dictionary)$/;

interface TableInfo {
  dir: string;
  name: string;
  engine: string;
  data: boolean;
}

interface Manifest {
  format: string;
  database: string;
  tables: TableInfo[];
}

export const quoteIdent = (s: string) => "`" + s.replace(/\\/g, "\\\\").replace(/`/g, "\\`") + "`";
export const quoteString = (s: string) => "'" + s.replace(/\\/g, "\\\\").replace(/'/g, "\\'") + "'";

function database(c: DbCredentials): string {
  return c.database ?? "default";
}

function client(c: DbCredentials, query: string, extra: Partial<ExecSpec> = {}): ExecSpec {
  return {
    cmd: ["clickhouse-client", "--host=127.0.0.1", "--port=9000", `--user=${c.user ?? "default"}`, `--query=${query}`],
    env: { CLICKHOUSE_USER: c.user ?? "default", CLICKHOUSE_PASSWORD: c.password },
    ...extra,
  };
}

async function listTables(t: DbTarget, db: string): Promise<TableInfo[]> {
  const out = await execCollect(
    t.engine,
    t.container,
    client(t.credentials, `SELECT name, engine FROM system.tables WHERE database = ${quoteString(db)} ORDER BY name FORMAT JSONEachRow`),
    t.signal,
    16 * 1024 * 1024,
  );
  const rows = out
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as { name: string; engine: string })
    // implicit storage of materialized views: recreated by their view
    .filter((r) => !r.name.startsWith(".inner"));
  const tables = rows.filter((r) => !VIEW_ENGINES.test(r.engine));
  const views = rows.filter((r) => VIEW_ENGINES.test(r.engine));
  return [...tables, ...views].map((r, i) => ({ dir: `tables/${String(i + 1).padStart(4, "0")}`, name: r.name, engine: r.engine, data: DATA_ENGINES.test(r.engine) }));
}

function* entry(name: string, body: Buffer): Generator<Buffer> {
  yield tarHeader(name, body.length);
  yield body;
  yield tarPadding(body.length);
}

async function dump(t: DbTarget): Promise<DumpSource> {
  const db = database(t.credentials);
  const tables = await listTables(t, db);
  t.progress(`clickhouse: ${tables.length} table(s) in ${db}`);
  const manifest: Manifest = { format: FORMAT, database: db, tables };
  let failure: unknown = null;
  async function* archive(): AsyncGenerator<Buffer> {
    yield* entry("manifest.json", Buffer.from(JSON.stringify(manifest, null, 2)));
    for (const table of tables) {
      const fq = `${quoteIdent(db)}.${quoteIdent(table.name)}`;
      const schema = await execCollect(t.engine, t.container, client(t.credentials, `SHOW CREATE TABLE ${fq} FORMAT TSVRaw`), t.signal, MAX_TEXT_ENTRY);
      yield* entry(`${table.dir}/schema.sql`, Buffer.from(schema));
      if (!table.data) continue;
      const s = await t.engine.execStream(t.container, client(t.credentials, `SELECT * FROM ${fq} FORMAT Native`), t.signal);
      let part: Buffer[] = [];
      let partBytes = 0;
      let seq = 0;
      const flush = function* (): Generator<Buffer> {
        if (partBytes === 0) return;
        seq += 1;
        yield* entry(`${table.dir}/data-${String(seq).padStart(6, "0")}.native`, Buffer.concat(part, partBytes));
        part = [];
        partBytes = 0;
      };
      for await (const chunk of s.stdout as AsyncIterable<Buffer>) {
        let off = 0;
        while (off < chunk.length) {
          const n = Math.min(PART_BYTES - partBytes, chunk.length - off);
          part.push(chunk.subarray(off, off + n));
          partBytes += n;
          off += n;
          if (partBytes === PART_BYTES) yield* flush();
        }
      }
      yield* flush();
      const outcome = await s.done;
      if (outcome.exitCode !== 0) {
        failure = toolFailure(`clickhouse-client (SELECT from ${table.name})`, outcome);
        throw failure;
      }
      t.progress(`clickhouse: ${table.name}: ${seq} part(s)`);
    }
    yield TAR_END;
  }
  const stream = Readable.from(archive());
  return {
    stream,
    finished: async () => {
      if (failure) throw failure;
    },
  };
}

async function readText(e: TarEntry): Promise<string> {
  if (e.header.size > MAX_TEXT_ENTRY) throw new BackupToolError(`${e.header.name} is too large for a metadata entry`);
  const chunks: Buffer[] = [];
  for await (const c of e.body) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

async function run(t: DbTarget, query: string): Promise<void> {
  await execCollect(t.engine, t.container, client(t.credentials, query), t.signal);
}

async function restore(t: DbTarget, plain: Readable): Promise<void> {
  const it = readTar(plain as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.header.name !== "manifest.json") throw new BackupToolError("not a Capstan ClickHouse backup (manifest.json missing)");
  const manifest = JSON.parse(await readText(first.value)) as Manifest;
  if (manifest.format !== FORMAT) throw new BackupToolError(`unknown ClickHouse backup format ${JSON.stringify(manifest.format)}`);
  const db = database(t.credentials);
  // The CREATE statements name the database they were dumped from.
  if (manifest.database !== db) throw new BackupToolError(`the backup is of database ${manifest.database}, not ${db}`);
  const byDir = new Map(manifest.tables.map((x) => [x.dir, x]));
  const tableOf = (name: string) => byDir.get(name.slice(0, name.lastIndexOf("/")));
  await run(t, `CREATE DATABASE IF NOT EXISTS ${quoteIdent(db)}`);
  let cur = await it.next();
  while (!cur.done) {
    const e = cur.value;
    const table = tableOf(e.header.name);
    if (!table) throw new BackupToolError(`unexpected entry ${e.header.name} in the backup`);
    const fq = `${quoteIdent(db)}.${quoteIdent(table.name)}`;
    if (e.header.name.endsWith("/schema.sql")) {
      const create = (await readText(e)).trim();
      await run(t, `DROP TABLE IF EXISTS ${fq}`);
      await run(t, create);
      t.progress(`clickhouse: ${table.name} created`);
      cur = await it.next();
      continue;
    }
    // Consecutive data parts of one table: one INSERT.
    let after: IteratorResult<TarEntry> | null = null;
    const dir = table.dir;
    async function* parts(): AsyncGenerator<Buffer> {
      let entry = e;
      for (;;) {
        yield* entry.body;
        const n = await it.next();
        if (!n.done && n.value.header.name.startsWith(`${dir}/data-`)) {
          entry = n.value;
          continue;
        }
        after = n;
        return;
      }
    }
    await execFeed(t.engine, t.container, client(t.credentials, `INSERT INTO ${fq} FORMAT Native`), Readable.from(parts()), t.signal);
    t.progress(`clickhouse: ${table.name} rows inserted`);
    if (!after) throw new BackupToolError(`the data of ${table.name} was not read to its end`);
    cur = after;
  }
}

export const clickhouseDriver: BackupDriver = { dump, restore };
