import type { PaginationQuery } from "@capstan/shared";
import { DEFAULT_PER_PAGE } from "@capstan/shared";

export interface PageWindow {
  skip: number;
  take: number;
  page: number;
  perPage: number;
}

/** null when the client asked for no page: the spec returns everything then. */
export function pageWindow(q: PaginationQuery): PageWindow | null {
  if (q.page === undefined && q.per_page === undefined) return null;
  const page = q.page ?? 1;
  const perPage = q.per_page ?? DEFAULT_PER_PAGE;
  return { skip: (page - 1) * perPage, take: perPage, page, perPage };
}

export interface Page<T> {
  data: T[];
  meta?: { current_page: number; per_page: number; total: number; last_page: number };
}

/**
 * Runs the list query with the page window and, when paginated, the matching count. A page
 * that is not full ends the list, so it gives the total itself and the count is not run
 * (a page past the end, with no rows, still needs it). So `find` must return the window's rows
 * exactly as the query limits them: filter in the query, never afterwards.
 */
export async function paginate<T>(
  q: PaginationQuery,
  count: () => Promise<number>,
  find: (window: { skip?: number; take?: number }) => Promise<T[]>,
): Promise<Page<T>> {
  const w = pageWindow(q);
  if (!w) return { data: await find({}) };
  const data = await find({ skip: w.skip, take: w.take });
  const total = data.length < w.take && (data.length > 0 || w.skip === 0) ? w.skip + data.length : await count();
  return {
    data,
    meta: { current_page: w.page, per_page: w.perPage, total, last_page: Math.max(1, Math.ceil(total / w.perPage)) },
  };
}

/** The same page window over a list already in memory (small, bounded lists). */
export function paginateArray<T>(q: PaginationQuery, all: T[]): Promise<Page<T>> {
  return paginate(
    q,
    async () => all.length,
    async (w) => all.slice(w.skip ?? 0, w.take === undefined ? undefined : (w.skip ?? 0) + w.take),
  );
}
