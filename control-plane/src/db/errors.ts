/** Prisma's code for a unique-constraint violation, the same on SQLite and PostgreSQL. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: string }).code === "P2002";
}

const codeOf = (err: unknown) => (typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined);

/**
 * How a write that lost a race with another request fails, the same on SQLite and PostgreSQL:
 * the row it changes or deletes is gone (P2025), a row it refers to is gone (P2003), the row it
 * creates was just created by the other (P2002), or the database gave up on a conflict or a
 * deadlock (P2034). Services check first, and these cover the window between check and write.
 * A transaction that could not start, or ran past its time limit, in the queue of those waiting
 * for the same lock (P2028; client.ts TRANSACTION_LIMITS) is "overloaded": retry later.
 */
export type LostRace = "missing" | "reference-gone" | "duplicate" | "conflict" | "overloaded";

export function lostRace(err: unknown): LostRace | undefined {
  switch (codeOf(err)) {
    case "P2025":
      return "missing";
    case "P2003":
      return "reference-gone";
    case "P2002":
      return "duplicate";
    case "P2034":
      return "conflict";
    case "P2028":
      return "overloaded";
  }
  return undefined;
}
