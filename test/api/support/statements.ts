import type { SqlReader } from "../../../control-plane/src/db/reader.js";

type Params = readonly (string | number)[];

/** The plain-SQL statements the instance's reader runs while `fn` runs (both of its entry points). */
export async function statementsDuring(reader: SqlReader, fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const rows = reader.rows.bind(reader);
  const all = reader.all.bind(reader);
  reader.rows = ((sql: string, params: Params) => (seen.push(sql), rows(sql, params))) as typeof reader.rows;
  reader.all = ((sql: string, params: Params) => (seen.push(sql), all(sql, params))) as typeof reader.all;
  try {
    await fn();
  } finally {
    reader.rows = rows;
    reader.all = all;
  }
  return seen;
}

/**
 * A request's own statements. The reader is the whole instance's: a background statement (the job queue's sweep, the
 * agents' token refresh) can fall inside one request's window, never inside all of them, so this is the fewest of `tries`
 * runs. `before` runs ahead of each try, outside the window (a write that makes the next read a cache miss).
 */
export async function requestStatements(reader: SqlReader, fn: () => Promise<unknown>, opts: { tries?: number; before?: () => Promise<unknown> } = {}): Promise<string[]> {
  let fewest: string[] | undefined;
  for (let i = 0; i < (opts.tries ?? 3); i++) {
    await opts.before?.();
    const seen = await statementsDuring(reader, fn);
    if (!fewest || seen.length < fewest.length) fewest = seen;
  }
  return fewest!;
}
