/**
 * A TOML 1.0 reader for the few files the builders read (capstan.toml, pyproject.toml).
 * It covers the whole syntax those files use: tables, arrays of tables, dotted and quoted
 * keys, the four string forms, integers, floats, booleans, arrays and inline tables.
 * Dates and times are kept as their text. Errors carry the line number.
 */

export class TomlError extends Error {
  constructor(
    message: string,
    readonly line: number,
  ) {
    super(`line ${line}: ${message}`);
    this.name = "TomlError";
  }
}

export type TomlTable = { [key: string]: TomlValue };
export type TomlValue = string | number | bigint | boolean | TomlValue[] | TomlTable;

const BARE_KEY = /[A-Za-z0-9_-]/;
const WS = /[ \t]/;

export function parseToml(source: string): TomlTable {
  return new Parser(source).parse();
}

class Parser {
  private pos = 0;
  private readonly root: TomlTable = {};
  /** Tables opened by a [header]: opening them again is an error. */
  private readonly headed = new WeakSet<object>();
  /** Tables made by dotted keys, and inline tables/arrays: closed to [headers]. */
  private readonly sealed = new WeakSet<object>();
  /** Arrays made by [[headers]]; only those accept more [[...]] entries. */
  private readonly tableArrays = new WeakSet<object>();
  /** Inline tables are complete as written. */
  private readonly inline = new WeakSet<object>();

  constructor(private readonly src: string) {
    if (src.charCodeAt(0) === 0xfeff) this.pos = 1;
  }

  parse(): TomlTable {
    let current = this.root;
    while (this.pos < this.src.length) {
      this.skipWs();
      const c = this.src[this.pos];
      if (c === undefined) break;
      if (c === "#") this.skipComment();
      else if (c === "\n" || c === "\r") this.newline();
      else if (c === "[") {
        current = this.header();
        this.endOfLine();
      } else {
        this.keyValue(current, new WeakSet());
        this.endOfLine();
      }
    }
    return this.root;
  }

  private fail(message: string): never {
    let line = 1;
    for (let i = 0; i < this.pos && i < this.src.length; i++) if (this.src[i] === "\n") line++;
    throw new TomlError(message, line);
  }

  private skipWs(): void {
    while (WS.test(this.src[this.pos] ?? "")) this.pos++;
  }

  private skipComment(): void {
    while (this.pos < this.src.length && this.src[this.pos] !== "\n") {
      const code = this.src.charCodeAt(this.pos);
      if (code !== 0x0d && code !== 0x09 && (code < 0x20 || code === 0x7f)) this.fail("control character in a comment");
      this.pos++;
    }
  }

  private newline(): void {
    if (this.src[this.pos] === "\r") {
      if (this.src[this.pos + 1] !== "\n") this.fail("a carriage return must be followed by a line feed");
      this.pos++;
    }
    this.pos++;
  }

  private endOfLine(): void {
    this.skipWs();
    const c = this.src[this.pos];
    if (c === "#") this.skipComment();
    if (this.pos >= this.src.length) return;
    const n = this.src[this.pos];
    if (n !== "\n" && n !== "\r") this.fail(`unexpected "${n}" after a value (one key = value per line)`);
    this.newline();
  }

  /** Skips spaces, line breaks and comments (inside arrays). */
  private skipBlank(): void {
    for (;;) {
      this.skipWs();
      const c = this.src[this.pos];
      if (c === "#") this.skipComment();
      else if (c === "\n" || c === "\r") this.newline();
      else return;
    }
  }

  private header(): TomlTable {
    const array = this.src.startsWith("[[", this.pos);
    this.pos += array ? 2 : 1;
    this.skipWs();
    const path = this.keyPath();
    this.skipWs();
    if (!this.src.startsWith(array ? "]]" : "]", this.pos)) this.fail(`expected "${array ? "]]" : "]"}" to close the table header`);
    this.pos += array ? 2 : 1;

    let table = this.root;
    for (const key of path.slice(0, -1)) table = this.descend(table, key);
    const last = path[path.length - 1]!;
    const existing = Object.hasOwn(table, last) ? table[last] : undefined;
    if (array) {
      if (existing === undefined) {
        const list: TomlValue[] = [];
        this.tableArrays.add(list);
        define(table, last, list);
        const entry: TomlTable = {};
        list.push(entry);
        return entry;
      }
      if (!Array.isArray(existing) || !this.tableArrays.has(existing)) this.fail(`"${path.join(".")}" is already defined and is not an array of tables`);
      const entry: TomlTable = {};
      existing.push(entry);
      return entry;
    }
    if (existing === undefined) {
      const t: TomlTable = {};
      this.headed.add(t);
      define(table, last, t);
      return t;
    }
    if (!isTable(existing) || this.headed.has(existing) || this.sealed.has(existing)) this.fail(`table "${path.join(".")}" is defined twice`);
    this.headed.add(existing);
    return existing;
  }

  /** Steps into `key` of `table` while following a header path (creating it implicitly). */
  private descend(table: TomlTable, key: string): TomlTable {
    const v = Object.hasOwn(table, key) ? table[key] : undefined;
    if (v === undefined) {
      const t: TomlTable = {};
      define(table, key, t);
      return t;
    }
    if (Array.isArray(v) && this.tableArrays.has(v)) {
      const lastEntry = v[v.length - 1];
      if (isTable(lastEntry)) return lastEntry;
    }
    // Sub-tables of a dotted-key table may be opened by a header; inline tables are complete.
    if (isTable(v) && !this.inline.has(v)) return v;
    this.fail(`"${key}" is already defined as a value`);
  }

  /** key = value into `table`; `local` holds the tables this statement's dotted keys created. */
  private keyValue(table: TomlTable, local: WeakSet<object>): void {
    const path = this.keyPath();
    this.skipWs();
    if (this.src[this.pos] !== "=") this.fail('expected "=" after the key');
    this.pos++;
    this.skipWs();
    let target = table;
    for (const key of path.slice(0, -1)) {
      const v = Object.hasOwn(target, key) ? target[key] : undefined;
      if (v === undefined) {
        const t: TomlTable = {};
        this.sealed.add(t);
        local.add(t);
        define(target, key, t);
        target = t;
      } else if (isTable(v) && (local.has(v) || (this.sealed.has(v) && !this.headed.has(v) && !this.inline.has(v)))) {
        target = v;
      } else {
        this.fail(`"${key}" is already defined`);
      }
    }
    const last = path[path.length - 1]!;
    if (Object.hasOwn(target, last)) this.fail(`"${path.join(".")}" is defined twice`);
    define(target, last, this.value());
  }

  private keyPath(): string[] {
    const keys = [this.key()];
    for (;;) {
      this.skipWs();
      if (this.src[this.pos] !== ".") return keys;
      this.pos++;
      this.skipWs();
      keys.push(this.key());
    }
  }

  private key(): string {
    const c = this.src[this.pos];
    if (c === '"') return this.basicString();
    if (c === "'") return this.literalString();
    const start = this.pos;
    while (BARE_KEY.test(this.src[this.pos] ?? "")) this.pos++;
    if (this.pos === start) this.fail(c === undefined || c === "\n" ? "expected a key" : `unexpected "${c}" where a key was expected`);
    return this.src.slice(start, this.pos);
  }

  private value(): TomlValue {
    const s = this.src;
    const c = s[this.pos];
    if (s.startsWith('"""', this.pos)) return this.multilineBasic();
    if (s.startsWith("'''", this.pos)) return this.multilineLiteral();
    if (c === '"') return this.basicString();
    if (c === "'") return this.literalString();
    if (c === "[") return this.array();
    if (c === "{") return this.inlineTable();
    if (s.startsWith("true", this.pos) && !BARE_KEY.test(s[this.pos + 4] ?? "")) {
      this.pos += 4;
      return true;
    }
    if (s.startsWith("false", this.pos) && !BARE_KEY.test(s[this.pos + 5] ?? "")) {
      this.pos += 5;
      return false;
    }
    return this.scalar();
  }

  private array(): TomlValue[] {
    this.pos++;
    const out: TomlValue[] = [];
    for (;;) {
      this.skipBlank();
      if (this.src[this.pos] === "]") break;
      out.push(this.value());
      this.skipBlank();
      const c = this.src[this.pos];
      if (c === ",") {
        this.pos++;
        continue;
      }
      if (c === "]") break;
      this.fail(c === undefined ? "unterminated array" : `expected "," or "]" in an array, found "${c}"`);
    }
    this.pos++;
    this.sealed.add(out);
    return out;
  }

  private inlineTable(): TomlTable {
    this.pos++;
    const t: TomlTable = {};
    this.sealed.add(t);
    this.inline.add(t);
    const local = new WeakSet<object>();
    this.skipWs();
    if (this.src[this.pos] === "}") {
      this.pos++;
      return t;
    }
    for (;;) {
      this.skipWs();
      if (this.src[this.pos] === "\n" || this.src[this.pos] === "\r") this.fail("an inline table must stay on one line");
      this.keyValue(t, local);
      this.skipWs();
      const c = this.src[this.pos];
      if (c === ",") {
        this.pos++;
        continue;
      }
      if (c === "}") {
        this.pos++;
        return t;
      }
      this.fail(c === "\n" || c === "\r" ? "an inline table must stay on one line" : `expected "," or "}" in an inline table`);
    }
  }

  private basicString(): string {
    this.pos++;
    let out = "";
    for (;;) {
      const c = this.src[this.pos];
      if (c === undefined || c === "\n" || c === "\r") this.fail("unterminated string");
      if (c === '"') {
        this.pos++;
        return out;
      }
      if (c === "\\") out += this.escape();
      else {
        this.checkChar(c);
        out += c;
        this.pos++;
      }
    }
  }

  private multilineBasic(): string {
    this.pos += 3;
    this.skipFirstNewline();
    let out = "";
    for (;;) {
      if (this.pos >= this.src.length) this.fail("unterminated multi-line string");
      if (this.src.startsWith('"""', this.pos)) {
        // Up to two quotes may sit right before the closing delimiter.
        let extra = 0;
        while (extra < 2 && this.src[this.pos + 3 + extra] === '"') extra++;
        out += '"'.repeat(extra);
        this.pos += 3 + extra;
        return out;
      }
      const c = this.src[this.pos]!;
      if (c === "\\") {
        const rest = /^\\[ \t]*\r?\n/.exec(this.src.slice(this.pos, this.pos + 256));
        if (rest) {
          // A line-ending backslash swallows the break and the blank space after it.
          this.pos += rest[0].length;
          while (/[ \t\r\n]/.test(this.src[this.pos] ?? "")) this.pos++;
          continue;
        }
        out += this.escape();
        continue;
      }
      if (c === "\r" && this.src[this.pos + 1] === "\n") {
        out += "\n";
        this.pos += 2;
        continue;
      }
      if (c !== "\n") this.checkChar(c);
      out += c;
      this.pos++;
    }
  }

  private literalString(): string {
    this.pos++;
    const start = this.pos;
    for (;;) {
      const c = this.src[this.pos];
      if (c === undefined || c === "\n" || c === "\r") this.fail("unterminated string");
      if (c === "'") {
        const out = this.src.slice(start, this.pos);
        this.pos++;
        return out;
      }
      this.checkChar(c);
      this.pos++;
    }
  }

  private multilineLiteral(): string {
    this.pos += 3;
    this.skipFirstNewline();
    let out = "";
    for (;;) {
      if (this.pos >= this.src.length) this.fail("unterminated multi-line string");
      if (this.src.startsWith("'''", this.pos)) {
        let extra = 0;
        while (extra < 2 && this.src[this.pos + 3 + extra] === "'") extra++;
        out += "'".repeat(extra);
        this.pos += 3 + extra;
        return out;
      }
      const c = this.src[this.pos]!;
      if (c === "\r" && this.src[this.pos + 1] === "\n") {
        out += "\n";
        this.pos += 2;
        continue;
      }
      if (c !== "\n") this.checkChar(c);
      out += c;
      this.pos++;
    }
  }

  private skipFirstNewline(): void {
    if (this.src[this.pos] === "\n") this.pos++;
    else if (this.src.startsWith("\r\n", this.pos)) this.pos += 2;
  }

  private checkChar(c: string): void {
    const code = c.charCodeAt(0);
    if (code !== 0x09 && (code < 0x20 || code === 0x7f)) this.fail("control character in a string (use an escape)");
  }

  private escape(): string {
    const e = this.src[this.pos + 1];
    const simple: Record<string, string> = { b: "\b", t: "\t", n: "\n", f: "\f", r: "\r", '"': '"', "\\": "\\" };
    if (e !== undefined && Object.hasOwn(simple, e)) {
      this.pos += 2;
      return simple[e]!;
    }
    if (e === "u" || e === "U") {
      const len = e === "u" ? 4 : 8;
      const hex = this.src.slice(this.pos + 2, this.pos + 2 + len);
      if (!new RegExp(`^[0-9A-Fa-f]{${len}}$`).test(hex)) this.fail(`\\${e} needs ${len} hex digits`);
      const cp = parseInt(hex, 16);
      if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) this.fail(`\\${e}${hex} is not a Unicode scalar value`);
      this.pos += 2 + len;
      return String.fromCodePoint(cp);
    }
    this.fail(`unknown escape "\\${e ?? ""}"`);
  }

  /** Numbers, and dates/times (kept as text). */
  private scalar(): TomlValue {
    const rest = this.src.slice(this.pos, this.pos + 128);
    const date = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})?)?|^\d{2}:\d{2}:\d{2}(?:\.\d+)?/.exec(rest);
    if (date) {
      this.pos += date[0].length;
      return date[0];
    }
    const m = /^[+-]?[0-9A-Za-z_.+-]+/.exec(rest);
    if (!m) this.fail(rest[0] === undefined || rest[0] === "\n" ? "expected a value" : `unexpected "${rest[0]}" where a value was expected`);
    const text = m[0];
    const n = parseNumber(text);
    if (n === null) this.fail(`"${text}" is not a valid value (strings need quotes)`);
    this.pos += text.length;
    return n;
  }
}

function parseNumber(text: string): number | bigint | null {
  if (/^[+-]?(inf|nan)$/.test(text)) return text.endsWith("nan") ? NaN : text.startsWith("-") ? -Infinity : Infinity;
  const radix = /^0([xob])([0-9A-Fa-f](?:_?[0-9A-Fa-f])*)$/.exec(text);
  if (radix) {
    const base = { x: 16, o: 8, b: 2 }[radix[1] as "x" | "o" | "b"];
    const digits = radix[2]!.replace(/_/g, "");
    if (![...digits].every((d) => parseInt(d, 16) < base)) return null;
    return toSafe(BigInt((radix[1] === "x" ? "0x" : radix[1] === "o" ? "0o" : "0b") + digits));
  }
  const DEC = "(?:0|[1-9](?:_?\\d)*)";
  if (new RegExp(`^[+-]?${DEC}$`).test(text)) return toSafe(BigInt(text.replace(/_/g, "")));
  const FLOAT = new RegExp(`^[+-]?${DEC}(?:\\.\\d(?:_?\\d)*)?(?:[eE][+-]?\\d(?:_?\\d)*)?$`);
  if (FLOAT.test(text) && /[.eE]/.test(text)) return Number(text.replace(/_/g, ""));
  return null;
}

/** Integers as numbers when exact, otherwise as bigint (TOML integers are 64-bit). */
function toSafe(n: bigint): number | bigint {
  return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
}

function isTable(v: unknown): v is TomlTable {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Plain property definition, so a key named __proto__ is just a key. */
function define(table: TomlTable, key: string, value: TomlValue): void {
  Object.defineProperty(table, key, { value, enumerable: true, writable: true, configurable: true });
}
