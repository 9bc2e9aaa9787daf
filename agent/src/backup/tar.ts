/**
 * Streaming tar, only what backups need: reading the engine's archive of one file (GET
 * /containers/{id}/archive), writing entries of known size (PUT archive, ClickHouse dumps) and
 * reading entries one after another with their bodies streamed. Nothing is held whole: a body is
 * yielded chunk by chunk as it arrives.
 */

const BLOCK = 512;

export interface TarHeader {
  name: string;
  size: number;
  mode: number;
  uid: number;
  gid: number;
  /** "0" regular file, "5" directory, ... */
  type: string;
  /** seconds since the epoch */
  mtime?: number;
  /** the target of a link ("1" hard, "2" symbolic) */
  linkname?: string;
}

/** Pulls exact byte counts out of a chunk iterator. */
class ByteReader {
  private buf: Buffer = Buffer.alloc(0);
  private done = false;
  constructor(private readonly it: AsyncIterator<Buffer | Uint8Array | string>) {}

  private async fill(min: number): Promise<void> {
    while (this.buf.length < min && !this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else {
        const chunk = typeof r.value === "string" ? Buffer.from(r.value) : Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength);
        this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
      }
    }
  }

  /** Exactly n bytes, or fewer at the end of the input. */
  async read(n: number): Promise<Buffer> {
    await this.fill(n);
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(out.length);
    return out;
  }

  /** Between 1 and max bytes (0 only at the end of the input). */
  async readSome(max: number): Promise<Buffer> {
    await this.fill(1);
    const out = this.buf.subarray(0, Math.min(max, this.buf.length));
    this.buf = this.buf.subarray(out.length);
    return out;
  }

  async skip(n: number): Promise<void> {
    let left = n;
    while (left > 0) {
      const got = await this.readSome(left);
      if (got.length === 0) throw new Error("tar: archive ends early");
      left -= got.length;
    }
  }
}

function cString(b: Buffer): string {
  const nul = b.indexOf(0);
  return b.subarray(0, nul < 0 ? b.length : nul).toString("utf8");
}

function numeric(b: Buffer): number {
  // GNU base-256 for values beyond the octal field (files over 8 GiB)
  if (b[0]! & 0x80) {
    let v = b[0]! & 0x7f;
    for (let i = 1; i < b.length; i++) v = v * 256 + b[i]!;
    return v;
  }
  const s = cString(b).trim();
  return s ? parseInt(s, 8) : 0;
}

function parseHeader(block: Buffer): TarHeader {
  const stored = numeric(block.subarray(148, 156));
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i]!;
  if (sum !== stored) throw new Error("tar: bad header checksum");
  const prefix = block.subarray(257, 263).toString("latin1").startsWith("ustar") ? cString(block.subarray(345, 500)) : "";
  const name = cString(block.subarray(0, 100));
  return {
    name: prefix ? `${prefix}/${name}` : name,
    mode: numeric(block.subarray(100, 108)),
    uid: numeric(block.subarray(108, 116)),
    gid: numeric(block.subarray(116, 124)),
    size: numeric(block.subarray(124, 136)),
    mtime: numeric(block.subarray(136, 148)),
    type: String.fromCharCode(block[156] || 0x30),
    linkname: cString(block.subarray(157, 257)),
  };
}

/** "len key=value\n" records of a pax extended header. */
function parsePax(body: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let off = 0;
  while (off < body.length) {
    const space = body.indexOf(0x20, off);
    if (space < 0) break;
    const len = parseInt(body.subarray(off, space).toString("ascii"), 10);
    if (!Number.isFinite(len) || len <= 0) break;
    const record = body.subarray(space + 1, off + len - 1).toString("utf8");
    const eq = record.indexOf("=");
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1);
    off += len;
  }
  return out;
}

export interface TarEntry {
  header: TarHeader;
  /** The entry's bytes; must be consumed (or skipped) before the next entry is read. */
  body: AsyncGenerator<Buffer>;
}

/** Metadata entries larger than this are refused (pax headers, GNU long names). */
const MAX_META = 1024 * 1024;

/** The entries of a tar stream, in order, bodies streamed. */
export async function* readTar(source: AsyncIterable<Buffer | Uint8Array | string>): AsyncGenerator<TarEntry> {
  const r = new ByteReader(source[Symbol.asyncIterator]());
  let pax: Record<string, string> = {};
  let longName: string | null = null;
  let longLink: string | null = null;
  for (;;) {
    const block = await r.read(BLOCK);
    if (block.length === 0) return; // some writers omit the end blocks
    if (block.length < BLOCK) throw new Error("tar: archive ends inside a header");
    if (block.every((b) => b === 0)) return;
    const h = parseHeader(block);
    const padded = Math.ceil(h.size / BLOCK) * BLOCK;
    if (h.type === "x" || h.type === "g" || h.type === "L" || h.type === "K") {
      if (h.size > MAX_META) throw new Error("tar: metadata entry too large");
      const body = await r.read(padded);
      if (h.type === "x") pax = parsePax(body.subarray(0, h.size));
      if (h.type === "L") longName = cString(body.subarray(0, h.size));
      if (h.type === "K") longLink = cString(body.subarray(0, h.size));
      continue;
    }
    const header: TarHeader = {
      ...h,
      name: pax.path ?? longName ?? h.name,
      size: pax.size !== undefined ? Number(pax.size) : h.size,
      linkname: pax.linkpath ?? longLink ?? h.linkname ?? "",
      mtime: pax.mtime !== undefined ? Math.floor(Number(pax.mtime)) : h.mtime ?? 0,
    };
    pax = {};
    longName = null;
    longLink = null;
    let consumed = false;
    let left = header.size;
    const body = (async function* () {
      while (left > 0) {
        const chunk = await r.readSome(Math.min(left, 1024 * 1024));
        if (chunk.length === 0) throw new Error(`tar: archive ends inside ${header.name}`);
        left -= chunk.length;
        yield chunk;
      }
      consumed = true;
    })();
    yield { header, body };
    if (!consumed) for await (const _ of body); // the consumer skipped it
    await r.skip(Math.ceil(header.size / BLOCK) * BLOCK - header.size);
  }
}

/** The bytes of the first regular file in a tar stream (the engine's archive of one file), with its header. */
export async function firstFile(source: AsyncIterable<Buffer | Uint8Array | string>): Promise<{ header: TarHeader; body: AsyncGenerator<Buffer> } | null> {
  for await (const entry of readTar(source)) {
    if (entry.header.type === "0" || entry.header.type === "\0" || entry.header.type === "7") return entry;
  }
  return null;
}

/** A ustar header for a regular file of `size` bytes. */
/**
 * A uid or gid in its 8-byte field: octal up to 7 digits, above that GNU's base-256 form (high
 * bit set, big-endian), which GNU tar and the Docker Engine's archive reader both accept; an
 * image may run its database as a uid of a user namespace range, far above 2097151.
 */
function putId(header: Buffer, offset: number, id: number): void {
  if (!Number.isSafeInteger(id) || id < 0 || id > 0xffffffff) throw new Error(`tar: unsupported owner id ${id}`);
  if (id < 8 ** 7) {
    header.write(id.toString(8).padStart(7, "0") + "\0", offset, 8, "ascii");
    return;
  }
  header.fill(0, offset, offset + 8);
  header[offset] = 0x80;
  header.writeUInt32BE(id, offset + 4);
}

export function tarHeader(name: string, size: number, opts: { mode?: number; uid?: number; gid?: number; mtime?: Date } = {}): Buffer {
  if (Buffer.byteLength(name) > 100 || !/^[A-Za-z0-9._\/-]+$/.test(name)) throw new Error(`tar: unsupported entry name ${JSON.stringify(name)}`);
  if (size >= 8 ** 11) throw new Error("tar: entry too large for a ustar header");
  const header = Buffer.alloc(BLOCK, 0);
  const put = (offset: number, length: number, value: string) => header.write(value, offset, length, "ascii");
  const octal = (n: number, width: number) => n.toString(8).padStart(width - 1, "0") + "\0";
  put(0, 100, name);
  put(100, 8, octal(opts.mode ?? 0o600, 8));
  putId(header, 108, opts.uid ?? 0);
  putId(header, 116, opts.gid ?? 0);
  put(124, 12, octal(size, 12));
  put(136, 12, octal(Math.floor((opts.mtime ?? new Date()).getTime() / 1000), 12));
  put(148, 8, "        ");
  put(156, 1, "0");
  put(257, 6, "ustar\0");
  put(263, 2, "00");
  let sum = 0;
  for (const b of header) sum += b;
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return header;
}

/** Zero bytes that pad an entry of `size` bytes to a whole block. */
export const tarPadding = (size: number) => Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK, 0);
/** The two zero blocks that end an archive. */
export const TAR_END = Buffer.alloc(2 * BLOCK, 0);

/** One file of known size as a tar stream (for PUT archive), its body streamed. */
export async function* singleFileTarStream(
  name: string,
  size: number,
  body: AsyncIterable<Buffer | Uint8Array>,
  opts: { mode?: number; uid?: number; gid?: number } = {},
): AsyncGenerator<Buffer> {
  yield tarHeader(name, size, opts);
  let sent = 0;
  for await (const chunk of body) {
    const b = Buffer.from(chunk);
    sent += b.length;
    if (sent > size) throw new Error(`tar: ${name} grew while it was being sent`);
    yield b;
  }
  if (sent !== size) throw new Error(`tar: ${name} has ${sent} bytes, ${size} expected`);
  yield tarPadding(size);
  yield TAR_END;
}

/** One "len key=value\n" record of a pax extended header (the length counts itself). */
function paxRecord(key: string, value: string): string {
  const rest = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(rest) + 1;
  while (String(len).length + Buffer.byteLength(rest) !== len) len = String(len).length + Buffer.byteLength(rest);
  return `${len}${rest}`;
}

const USTAR_NAME = /^[\x20-\x7e]{1,100}$/;

/**
 * The header block(s) of any entry re-packed from another archive (volume backups): a ustar
 * header, preceded by a pax extended header when the name or link target is long or not plain
 * ASCII, or the size does not fit the octal field. Ids above the octal range use base-256.
 */
export function entryHeaders(h: { name: string; type: string; size: number; mode: number; uid: number; gid: number; mtime: number; linkname?: string }): Buffer[] {
  const records: string[] = [];
  const plainName = USTAR_NAME.test(h.name) ? h.name : null;
  const link = h.linkname ?? "";
  const plainLink = link === "" || USTAR_NAME.test(link) ? link : null;
  if (plainName === null) records.push(paxRecord("path", h.name));
  if (plainLink === null) records.push(paxRecord("linkpath", link));
  const bigSize = h.size >= 8 ** 11;
  if (bigSize) records.push(paxRecord("size", String(h.size)));
  const out: Buffer[] = [];
  const block = (name: string, type: string, size: number, linkname: string) => {
    const header = Buffer.alloc(BLOCK, 0);
    const put = (offset: number, length: number, value: string) => header.write(value, offset, length, "utf8");
    const octal = (n: number, width: number) => n.toString(8).padStart(width - 1, "0") + "\0";
    put(0, 100, name);
    put(100, 8, octal(h.mode & 0o7777, 8));
    putId(header, 108, h.uid);
    putId(header, 116, h.gid);
    put(124, 12, octal(size, 12));
    put(136, 12, octal(Math.max(0, Math.floor(h.mtime)), 12));
    put(148, 8, "        ");
    put(156, 1, type);
    put(157, 100, linkname);
    put(257, 6, "ustar\0");
    put(263, 2, "00");
    let sum = 0;
    for (const b of header) sum += b;
    put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
    return header;
  };
  if (records.length) {
    const body = Buffer.from(records.join(""), "utf8");
    out.push(block("PaxHeader", "x", body.length, ""), body, tarPadding(body.length));
  }
  // The ustar fields keep a truncated, ASCII-safe form for readers without pax.
  const safe = (v: string) => v.replace(/[^\x20-\x7e]/g, "_").slice(0, 100);
  out.push(block(plainName ?? safe(h.name), h.type, bigSize ? 0 : h.size, plainLink ?? safe(link)));
  return out;
}
