import { Readable } from "node:stream";
import { finished } from "node:stream/promises";
import type { DbCredentials } from "@capstan/shared";
import type { ExecSpec } from "../../docker/engine.js";
import { BackupToolError, execCollect, execFeed, toolFailure, type DumpSource } from "../exec.js";
import { readTar, TAR_END, tarHeader, tarPadding, type TarEntry } from "../tar.js";
import { type SecretFile, type SecretFileTarget, withSecretFile } from "./secret-file.js";
import type { BackupDriver, DbTarget } from "./types.js";

/**
 * ClickHouse: a logical dump of the one database of the credentials (clickhouse_db; `default`
 * for a database stored before that parameter existed) made with clickhouse-client only (no
 * server configuration needed, unlike BACKUP ... TO Disk, and it works on old servers too),
 * written as a tar stream (the `native.tar` of the file name):
 *
 *   manifest.json                      {format, database, tables: [{dir, name, engine, data}]}
 *   tables/0001/schema.sql             SHOW CREATE TABLE of each table and view
 *   tables/0001/data-000001.native     SELECT * ... FORMAT Native, cut into parts of at most 8 MiB
 *
 * Tables come first (each with its data), views after them, so that restoring a materialized
 * view cannot fire on the restored rows. The parts of a table concatenated are its Native
 * stream (`cat tables/0001/data-* | clickhouse-client -q "INSERT INTO t FORMAT Native"` by hand).
 * Restore: CREATE DATABASE IF NOT EXISTS, then per table DROP TABLE IF EXISTS + its CREATE, its
 * parts streamed into one INSERT ... FORMAT Native. Memory: one part (8 MiB) being filled, and
 * the output stream's buffer (BUFFER_BYTES): a byte stream, never a queue of whole parts.
 * Not covered: the data of materialized views' implicit inner tables (recreated empty: they fill
 * from new inserts), dictionaries' sources, users and grants (access management).
 * The credentials are in a client config file (secret-file.ts) named by `--config-file=`: an
 * XML `<config>` with `<user>` and `<password>`, the form clickhouse-client has read since long
 * before 18.16 (the test image) and still documents. Given `--config-file`, the client reads no
 * other config file (neither ~/.clickhouse-client/ nor /etc/clickhouse-client/).
 */
const FORMAT = "capstan-clickhouse-native/1";
const PART_BYTES = 8 * 1024 * 1024;
/** How many bytes the dump's output stream buffers ahead of its reader. */
const BUFFER_BYTES = 256 * 1024;
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

const xmlText = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");

/** The client's config file: user and password. XML 1.0 cannot carry control characters. */
export function clientConfig(c: DbCredentials): SecretFile {
  const user = c.user ?? "default";
  if (/[\x00-\x08\x0b\x0c\x0e-\x1f]/.test(user + c.password)) throw new BackupToolError("the user or password holds control characters, which a ClickHouse config file cannot carry");
  return { name: "client.xml", content: `<config><user>${xmlText(user)}</user><password>${xmlText(c.password)}</password></config>\n` };
}

/** One clickhouse-client run; `config` is the path of the client config file. */
function client(c: DbCredentials, config: string, query: string): ExecSpec {
  return { cmd: ["clickhouse-client", `--config-file=${config}`, "--host=127.0.0.1", "--port=9000", `--user=${c.user ?? "default"}`, `--query=${query}`] };
}

/**
 * Creates the credentials' database once the server is up, when it is missing (a first start).
 * The agent does this instead of the image's CLICKHOUSE_DB: the official image's first-start
 * init runs its client with the password in argv (seen by every process of the host), and its
 * temporary server on 127.0.0.1 answers the health probe meanwhile, so the database would look
 * healthy before other containers can connect. Idempotent: every deploy runs it.
 */
export async function ensureDatabase(t: SecretFileTarget & { credentials: DbCredentials }): Promise<void> {
  const db = database(t.credentials);
  if (db === "default") return;
  await withSecretFile(t, clientConfig(t.credentials), (config) => execCollect(t.engine, t.container, client(t.credentials, config, `CREATE DATABASE IF NOT EXISTS ${quoteIdent(db)}`), t.signal));
  t.progress(`clickhouse: database ${db} is there`);
}

async function listTables(t: DbTarget, config: string, db: string): Promise<TableInfo[]> {
  const out = await execCollect(
    t.engine,
    t.container,
    client(t.credentials, config, `SELECT name, engine FROM system.tables WHERE database = ${quoteString(db)} ORDER BY name FORMAT JSONEachRow`),
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

/** One tar entry whose body is given as chunks (not joined: a part is never copied whole). */
function* entry(name: string, body: Buffer[], size = body.reduce((n, b) => n + b.length, 0)): Generator<Buffer> {
  yield tarHeader(name, size);
  yield* body;
  yield tarPadding(size);
}

async function dump(t: DbTarget): Promise<DumpSource> {
  return withSecretFile(t, clientConfig(t.credentials), (config) => dumpWith(t, config), {
    // The config file is needed until the last table was read: the stream's end (or its teardown).
    holdUntil: (src) => finished(src.stream),
  });
}

async function dumpWith(t: DbTarget, config: string): Promise<DumpSource> {
  const db = database(t.credentials);
  const tables = await listTables(t, config, db);
  t.progress(`clickhouse: ${tables.length} table(s) in ${db}`);
  const manifest: Manifest = { format: FORMAT, database: db, tables };
  let failure: unknown = null;
  async function* archive(): AsyncGenerator<Buffer> {
    yield* entry("manifest.json", [Buffer.from(JSON.stringify(manifest, null, 2))]);
    for (const table of tables) {
      const fq = `${quoteIdent(db)}.${quoteIdent(table.name)}`;
      const schema = await execCollect(t.engine, t.container, client(t.credentials, config, `SHOW CREATE TABLE ${fq} FORMAT TSVRaw`), t.signal, MAX_TEXT_ENTRY);
      yield* entry(`${table.dir}/schema.sql`, [Buffer.from(schema)]);
      if (!table.data) continue;
      const s = await t.engine.execStream(t.container, client(t.credentials, config, `SELECT * FROM ${fq} FORMAT Native`), t.signal);
      let part: Buffer[] = [];
      let partBytes = 0;
      let seq = 0;
      const flush = function* (): Generator<Buffer> {
        if (partBytes === 0) return;
        seq += 1;
        const chunks = part;
        const size = partBytes;
        part = [];
        partBytes = 0;
        yield* entry(`${table.dir}/data-${String(seq).padStart(6, "0")}.native`, chunks, size);
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
  // Bytes, not objects: Readable.from's default object mode would queue 16 chunks ahead, whole
  // parts among them (over 100 MiB).
  const stream = Readable.from(archive(), { objectMode: false, highWaterMark: BUFFER_BYTES });
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

const restore = (t: DbTarget, plain: Readable): Promise<void> => withSecretFile(t, clientConfig(t.credentials), (config) => restoreWith(t, config, plain));

async function restoreWith(t: DbTarget, config: string, plain: Readable): Promise<void> {
  const run = (query: string) => execCollect(t.engine, t.container, client(t.credentials, config, query), t.signal);
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
  await run(`CREATE DATABASE IF NOT EXISTS ${quoteIdent(db)}`);
  let cur = await it.next();
  while (!cur.done) {
    const e = cur.value;
    const table = tableOf(e.header.name);
    if (!table) throw new BackupToolError(`unexpected entry ${e.header.name} in the backup`);
    const fq = `${quoteIdent(db)}.${quoteIdent(table.name)}`;
    if (e.header.name.endsWith("/schema.sql")) {
      const create = (await readText(e)).trim();
      await run(`DROP TABLE IF EXISTS ${fq}`);
      await run(create);
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
    const input = Readable.from(parts(), { objectMode: false, highWaterMark: BUFFER_BYTES });
    await execFeed(t.engine, t.container, client(t.credentials, config, `INSERT INTO ${fq} FORMAT Native`), input, t.signal);
    t.progress(`clickhouse: ${table.name} rows inserted`);
    if (!after) throw new BackupToolError(`the data of ${table.name} was not read to its end`);
    cur = after;
  }
}

export const clickhouseDriver: BackupDriver = { dump, restore };
