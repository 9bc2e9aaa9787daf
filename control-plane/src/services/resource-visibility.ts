import type { Db } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";

/**
 * Keeps the items of a server-wide list (resources or domains on a server, whether read from
 * the engine or from stored records) whose resource the caller may see: an application or a
 * database of the team in an environment the caller sees (TeamScope's visibility rules, the
 * same as GET /applications and /databases). Callers who see the whole team (owners, admins,
 * viewers, automation tokens) get the list as it is. For the others, an item naming no resource
 * of the team (a container left on the server by a deleted resource, a resource kind without
 * records) is left out: nothing tells which project it belonged to.
 */
export async function onlyVisibleResources<T>(db: Db, scope: TeamScope, items: T[], uuidOf: (item: T) => string | null | undefined): Promise<T[]> {
  if (!scope.visibility()) return items;
  const uuids = [...new Set(items.map(uuidOf).filter((u): u is string => !!u))];
  if (!uuids.length) return [];
  const environment = { select: { id: true, projectId: true } } as const;
  const where = { teamId: scope.teamId, uuid: { in: uuids } };
  const rows = [
    ...(await db.application.findMany({ where, select: { uuid: true, environment } })),
    ...(await db.standaloneDatabase.findMany({ where, select: { uuid: true, environment } })),
  ];
  const visible = new Set<string>();
  for (const row of rows) if (await scope.canSeeEnvironment(row.environment)) visible.add(row.uuid);
  return items.filter((item) => {
    const uuid = uuidOf(item);
    return !!uuid && visible.has(uuid);
  });
}
