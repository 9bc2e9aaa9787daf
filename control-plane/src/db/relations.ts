/**
 * Torn reads. Prisma loads the relations of an `include` (or a nested `select`) with statements
 * of their own after the row's, not in one snapshot: on PostgreSQL each statement sees what was
 * committed when it ran, and on SQLite another request's transaction may commit between two of
 * them. A delete committed in between (a project's takes its environments, applications and
 * databases along) leaves a relation the schema requires null on a row that no longer exists:
 * the route fuzz found GET /applications/{uuid} answering 500 during DELETE /projects/{uuid}
 * on PostgreSQL. Such a row was removed while it was read, and counts as not there.
 *
 * `paths` names the required to-one relations the caller reads, dotted through nested ones
 * ("environment.project"); optional relations (null by design) are not named.
 */
export function whole<T>(row: T | null | undefined, paths: readonly string[]): T | null {
  if (row === null || row === undefined) return null;
  for (const path of paths) {
    let at: unknown = row;
    for (const key of path.split(".")) {
      at = (at as Record<string, unknown>)[key];
      if (at === null || at === undefined) return null;
    }
  }
  return row;
}

/** A list read without its torn rows (whole): those were removed while the list was read. */
export function wholeRows<T>(rows: T[], paths: readonly string[]): T[] {
  return rows.filter((row) => whole(row, paths) !== null);
}
