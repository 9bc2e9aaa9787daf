/**
 * Plain SQL for the queue's and the gateway's grouped writes. Prisma's model calls cost far
 * more per row when a call carries many rows (a createMany or an updateMany with one OR term
 * per row: about 0.2 ms of CPU per row here, against some 0.04 ms for the same statement
 * written out), so the hot grouped writes are written per dialect over a VALUES list. They
 * run through db/plain-writer.ts, which stores Dates as Prisma stores them (ISO text on
 * SQLite, timestamp(3) in UTC on PostgreSQL).
 */
export type Dialect = "sqlite" | "postgresql";

/** PostgreSQL types of the columns of a VALUES list (SQLite needs none). */
export type PgType = "text" | "int" | "boolean" | "timestamp(3)";

/**
 * `(?, ?), (?, ?)` on SQLite; `($1::int, $2::text), ($3::int, $4::text)` on PostgreSQL, for
 * `rows` rows of these column types, numbering PostgreSQL parameters from `first`.
 */
export function valuesList(dialect: Dialect, rows: number, types: readonly PgType[], first = 1): string {
  const out: string[] = [];
  let n = first;
  for (let r = 0; r < rows; r++) {
    out.push(`(${types.map((t) => (dialect === "sqlite" ? "?" : `$${n++}::${t}`)).join(", ")})`);
  }
  return out.join(", ");
}

/** A single parameter after a VALUES list: `?`, or `$n::type` numbered after it. */
export function param(dialect: Dialect, position: number, type: PgType): string {
  return dialect === "sqlite" ? "?" : `$${position}::${type}`;
}
