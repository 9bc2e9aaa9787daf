import { TomlDate, TomlError as ParseError, parse } from "smol-toml";

/**
 * The TOML files the builders read (capstan.toml, pyproject.toml), parsed by smol-toml (a
 * maintained, spec-compliant TOML 1.0 parser). This file only adapts its output to what the
 * builders expect: dates and times as their text, integers beyond 2^53 as bigint, and errors
 * that name the line and column with the reason and the offending line.
 */

export class TomlError extends Error {
  constructor(
    readonly reason: string,
    readonly line: number,
    readonly column: number,
    near: string,
  ) {
    super(`line ${line}, column ${column}: ${reason}${near ? ` (near ${JSON.stringify(near)})` : ""}`);
    this.name = "TomlError";
  }
}

export type TomlTable = { [key: string]: TomlValue };
export type TomlValue = string | number | bigint | boolean | TomlValue[] | TomlTable;

export function parseToml(source: string): TomlTable {
  let doc: unknown;
  try {
    doc = parse(source, { integersAsBigInt: "asNeeded" });
  } catch (err) {
    if (!(err instanceof ParseError)) throw err;
    const reason = (err.message.split("\n")[0] ?? "").replace(/^Invalid TOML document:\s*/, "");
    const near = (source.split(/\r?\n/)[err.line - 1] ?? "").trim().slice(0, 80);
    throw new TomlError(reason, err.line, err.column, near);
  }
  return adapt(doc) as TomlTable;
}

/**
 * Dates become their text (the builders never compute with them; a date in an env table is
 * written as text). Tables stay objects without a prototype, as the parser made them, so a key
 * like `__proto__` is an ordinary key.
 */
function adapt(v: unknown): TomlValue {
  if (v instanceof TomlDate) return v.toISOString();
  if (Array.isArray(v)) return v.map(adapt);
  if (typeof v === "object" && v !== null) {
    const out = Object.create(null) as TomlTable;
    for (const [k, x] of Object.entries(v)) out[k] = adapt(x);
    return out;
  }
  return v as TomlValue;
}
