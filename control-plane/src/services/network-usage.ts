import type { Db } from "../db/client.js";
import type { NetworkConfig } from "../config.js";
import { publicApplicationWhere } from "./network-plan.js";

type Row = { scope: string; environmentId: number | null; _count: { attachments: number } };

/**
 * resource_count of each network: the team's resources (applications and databases) that use
 * it under the settings in effect, as GET /networks/resource/{type}/{uuid} shows them.
 * - environment: the environment's resources on the server, while resources are placed on
 *   environment networks (management on, mode environment or strict);
 * - proxy: the applications with an fqdn on the server, while proxy isolation is on;
 * - shared (and any other scope): the resources users attached to it.
 * At most three statements whatever the number of networks or resources: the counts are
 * grouped by environment, never read per network.
 */
export async function withResourceCounts<T extends Row>(
  db: Db,
  settings: NetworkConfig,
  server: { id: number; teamId: number },
  rows: readonly T[],
): Promise<(T & { resourceCount: number })[]> {
  const placed = settings.management && settings.isolation !== "none";
  const envIds = placed ? [...new Set(rows.flatMap((r) => (r.scope === "environment" && r.environmentId !== null ? [r.environmentId] : [])))] : [];
  const routed = settings.proxyIsolation && rows.some((r) => r.scope === "proxy");
  const where = { serverId: server.id, teamId: server.teamId, environmentId: { in: envIds } };
  const [apps, dbs, publicApps] = await Promise.all([
    envIds.length ? db.application.groupBy({ by: ["environmentId"], where, _count: { _all: true } }) : [],
    envIds.length ? db.standaloneDatabase.groupBy({ by: ["environmentId"], where, _count: { _all: true } }) : [],
    routed ? db.application.count({ where: { serverId: server.id, teamId: server.teamId, ...publicApplicationWhere } }) : 0,
  ]);
  const perEnvironment = new Map<number, number>();
  for (const g of [...apps, ...dbs]) perEnvironment.set(g.environmentId, (perEnvironment.get(g.environmentId) ?? 0) + g._count._all);
  const countOf = (r: T): number => {
    if (r.scope === "environment") return r.environmentId === null ? 0 : (perEnvironment.get(r.environmentId) ?? 0);
    if (r.scope === "proxy") return routed ? publicApps : 0;
    return r._count.attachments;
  };
  return rows.map((r) => ({ ...r, resourceCount: countOf(r) }));
}
