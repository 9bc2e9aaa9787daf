/**
 * SQLite binds at most 999 values per statement and Prisma does not split `in` lists for
 * it: any id list that grows with the fleet goes through this.
 */
export const MAX_BOUND_IDS = 900;

export function chunks<T>(items: T[], size = MAX_BOUND_IDS): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
