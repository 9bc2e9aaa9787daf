/** Prisma's code for a unique-constraint violation, the same on SQLite and PostgreSQL. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: string }).code === "P2002";
}
