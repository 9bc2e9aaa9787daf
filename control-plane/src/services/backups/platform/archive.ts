import { createHash, type Hash } from "node:crypto";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { decryptStream, looksLikeGzip, looksLikeOpenPgp } from "@capstan/shared/openpgp";

/**
 * The platform_instance archive (issue 19, docs/resource-backups.md "Restoring the platform"):
 * gzip-compressed NDJSON, OpenPGP AEAD-encrypted on top when the storage has a passphrase. One
 * JSON value per line, in this order:
 *
 *   {"format":"capstan-platform-backup","version":1,"created_at":..,"source":"sqlite"|"postgresql","migrations":[..]}
 *   {"file":"secret.key","sha256":..,"data":<base64>}          the instance key (seals every secret)
 *   {"table":"Team","fields":[["id","Int"],..]}                 then one {"r":[..]} per row
 *   {"end":"Team","rows":n}
 *   ... every table, parents before children (foreign keys) ...
 *   {"manifest":{"sha256":<of every byte before this line>,"tables":{..counts},"files":{..sha256},"lines":n}}
 *
 * Values are portable: Int and Boolean as JSON, BigInt as a decimal string, DateTime as ISO 8601
 * UTC; one archive restores into SQLite or PostgreSQL whichever it came from. Secrets stay
 * sealed (the key travels beside them), so the archive is as sensitive as the data directory.
 */
export const ARCHIVE_FORMAT = "capstan-platform-backup";
export const ARCHIVE_VERSION = 1;
export const KEY_FILE_NAME = "secret.key";

export type FieldType = "Int" | "String" | "Boolean" | "DateTime" | "BigInt";
export const FIELD_TYPES: readonly FieldType[] = ["Int", "String", "Boolean", "DateTime", "BigInt"];

export interface ArchiveHeader {
  format: typeof ARCHIVE_FORMAT;
  version: number;
  created_at: string;
  source: "sqlite" | "postgresql";
  migrations: string[];
}
export interface ArchiveManifest {
  sha256: string;
  tables: Record<string, number>;
  files: Record<string, string>;
  lines: number;
}
export type ArchiveLine =
  | { kind: "header"; header: ArchiveHeader }
  | { kind: "file"; name: string; data: Buffer }
  | { kind: "table"; table: string; fields: [string, FieldType][] }
  | { kind: "row"; values: unknown[] }
  | { kind: "end"; table: string; rows: number };

/** A platform archive that cannot be restored: the reason is for the operator. */
export class ArchiveError extends Error {
  override name = "ArchiveError";
}

/** `platform-<UTC yyyymmddThhmmssZ>-<first 8 of the execution uuid>.ndjson.gz[.gpg]` */
export function platformBackupFilename(at: Date, executionUuid: string, encrypted: boolean): string {
  const stamp = at.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}Z$/, "Z");
  return `platform-${stamp}-${executionUuid.slice(0, 8)}.ndjson.gz${encrypted ? ".gpg" : ""}`;
}

/** Writes the lines of an archive and keeps the manifest (its hash, counts) as they go. */
export class ArchiveWriter {
  private readonly hash = createHash("sha256");
  private lines = 0;
  private readonly tables: Record<string, number> = {};
  private readonly files: Record<string, string> = {};

  private line(value: unknown): Buffer {
    const bytes = Buffer.from(JSON.stringify(value) + "\n", "utf8");
    this.hash.update(bytes);
    this.lines++;
    return bytes;
  }
  header(h: Omit<ArchiveHeader, "format" | "version">): Buffer {
    return this.line({ format: ARCHIVE_FORMAT, version: ARCHIVE_VERSION, ...h });
  }
  file(name: string, data: Buffer): Buffer {
    const sha256 = createHash("sha256").update(data).digest("hex");
    this.files[name] = sha256;
    return this.line({ file: name, sha256, data: data.toString("base64") });
  }
  table(name: string, fields: [string, FieldType][]): Buffer {
    this.tables[name] = 0;
    return this.line({ table: name, fields });
  }
  row(table: string, values: unknown[]): Buffer {
    this.tables[table]!++;
    return this.line({ r: values });
  }
  end(table: string): Buffer {
    return this.line({ end: table, rows: this.tables[table] });
  }
  /** The last line: it is not part of its own hash. */
  manifest(): Buffer {
    const manifest: ArchiveManifest = { sha256: this.hash.digest("hex"), tables: this.tables, files: this.files, lines: this.lines };
    return Buffer.from(JSON.stringify({ manifest }) + "\n", "utf8");
  }
}

/**
 * The plaintext lines of an archive: OpenPGP is recognised by its first byte (a passphrase is
 * then required; only AEAD data is accepted and each chunk is authenticated as it is read), then
 * gunzip. Errors are ArchiveErrors with the reason.
 */
async function* plainLines(source: Readable, passphrase: string | null): AsyncGenerator<string> {
  const iterator = source[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done) throw new ArchiveError("the archive is empty");
  const head = Buffer.from(first.value as Buffer);
  const rest = Readable.from(
    (async function* () {
      yield head;
      for (;;) {
        const n = await iterator.next();
        if (n.done) return;
        yield n.value as Buffer;
      }
    })(),
  );
  let compressed: Readable = rest;
  if (looksLikeOpenPgp(head)) {
    if (!passphrase) throw new ArchiveError("the archive is encrypted: give the storage's encryption passphrase (CAPSTAN_RESTORE_PASSPHRASE or --passphrase-stdin)");
    try {
      compressed = await decryptStream(rest, passphrase);
    } catch (err) {
      throw new ArchiveError((err as Error).message);
    }
  } else if (!looksLikeGzip(head)) {
    throw new ArchiveError("not a Capstan platform archive (neither gzip nor OpenPGP)");
  }
  const gunzip = createGunzip();
  compressed.on("error", (err) => gunzip.destroy(err));
  const reader = createInterface({ input: compressed.pipe(gunzip), crlfDelay: Infinity });
  try {
    for await (const line of reader) yield line;
  } catch (err) {
    const msg = (err as Error).message;
    if (err instanceof ArchiveError) throw err;
    throw new ArchiveError(/unexpected end|truncated/i.test(msg) ? `the archive is truncated (${msg})` : `the archive could not be read: ${msg}`);
  }
}

function parseLine(text: string, n: number): Record<string, unknown> {
  try {
    const v = JSON.parse(text) as unknown;
    if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // the reason below
  }
  throw new ArchiveError(`line ${n} of the archive is not a JSON object`);
}

/**
 * Reads an archive line by line and checks it against its manifest: `onLine` sees every line
 * before the manifest (checked for shape); the manifest's hash, counts and file hashes are
 * compared at the end, so a caller that writes must do so in a transaction it rolls back when
 * this rejects. A missing manifest means a truncated archive.
 */
export async function readArchive(source: Readable, passphrase: string | null, onLine: (line: ArchiveLine) => Promise<void> | void): Promise<{ header: ArchiveHeader; manifest: ArchiveManifest }> {
  const hash: Hash = createHash("sha256");
  let header: ArchiveHeader | null = null;
  let manifest: ArchiveManifest | null = null;
  const tables: Record<string, number> = {};
  const files: Record<string, string> = {};
  let current: { table: string; width: number } | null = null;
  let n = 0;
  for await (const text of plainLines(source, passphrase)) {
    n++;
    if (manifest) throw new ArchiveError("the archive has data after its manifest");
    const v = parseLine(text, n);
    if ("manifest" in v) {
      manifest = v.manifest as ArchiveManifest;
      continue;
    }
    hash.update(text + "\n", "utf8");
    if (n === 1) {
      if (v.format !== ARCHIVE_FORMAT) throw new ArchiveError("not a Capstan platform archive (no header)");
      if (v.version !== ARCHIVE_VERSION) throw new ArchiveError(`archive format version ${String(v.version)} is not supported by this version (${ARCHIVE_VERSION})`);
      header = v as unknown as ArchiveHeader;
      await onLine({ kind: "header", header });
    } else if (typeof v.file === "string" && typeof v.data === "string") {
      const data = Buffer.from(v.data, "base64");
      files[v.file] = createHash("sha256").update(data).digest("hex");
      await onLine({ kind: "file", name: v.file, data });
    } else if (typeof v.table === "string" && Array.isArray(v.fields)) {
      if (current) throw new ArchiveError(`table ${current.table} has no end line`);
      const fields = v.fields as [string, FieldType][];
      if (!fields.every((f) => Array.isArray(f) && typeof f[0] === "string" && FIELD_TYPES.includes(f[1]))) throw new ArchiveError(`table ${v.table}: unknown field types`);
      current = { table: v.table, width: fields.length };
      tables[v.table] = 0;
      await onLine({ kind: "table", table: v.table, fields });
    } else if (Array.isArray(v.r)) {
      if (!current || v.r.length !== current.width) throw new ArchiveError(`line ${n}: a row outside its table or of the wrong width`);
      tables[current.table]!++;
      await onLine({ kind: "row", values: v.r });
    } else if (typeof v.end === "string") {
      if (!current || current.table !== v.end || v.rows !== tables[v.end]) throw new ArchiveError(`table ${String(v.end)}: its end line does not match its rows`);
      current = null;
      await onLine({ kind: "end", table: v.end, rows: v.rows as number });
    } else {
      throw new ArchiveError(`line ${n} of the archive is not a known record`);
    }
  }
  if (!header) throw new ArchiveError("the archive is empty");
  if (!manifest) throw new ArchiveError("the archive is truncated: it ends before its manifest");
  if (manifest.sha256 !== hash.digest("hex")) throw new ArchiveError("the archive does not match its manifest's sha256 (altered or damaged)");
  if (manifest.lines !== n - 1) throw new ArchiveError("the archive's line count does not match its manifest");
  if (JSON.stringify(manifest.tables) !== JSON.stringify(tables)) throw new ArchiveError("the archive's tables do not match its manifest");
  if (JSON.stringify(manifest.files) !== JSON.stringify(files)) throw new ArchiveError("the archive's files do not match their sha256 in the manifest");
  return { header, manifest };
}
