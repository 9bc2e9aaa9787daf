import { DatabaseEngine, LABEL_DOMAINS, LABEL_RESOURCE_UUID, RESOURCE_TYPE_APPLICATION, databaseType, parseDomains, type ManagedContainer } from "@capstan/shared";
import { PADDED_IN_MAX, paddedIn, toDate, toInt, type SqlReader } from "../db/reader.js";
import { chunks } from "../db/chunks.js";
import type { TeamScope } from "../domain/scope.js";

/**
 * What GET /servers/{uuid}/resources and /domains list (issue 15): every resource the platform
 * placed on the server, from the stored records, so the answer never depends on the agent being
 * there; what the engine runs now is merged in when the agent answers.
 *
 * One statement reads the stored rows (applications and databases, later services, each with its
 * last known status, the one the agent reported), filtered by the caller's visibility with the
 * team scope's list rule (a member sees the resources of the environments its grants reach, as
 * in every other list). The two lists are built from those rows by the functions below and
 * nothing else, so a further filter applies to the rows once.
 */

/** One stored resource of the server, as the caller may see it. */
export interface StoredResource {
  uuid: string;
  name: string;
  /** application, or standalone-<engine> for a database (the spec's type). */
  type: string;
  /** The last status the agent reported (e.g. running:healthy; exited before the first start). */
  status: string;
  /** Configured domains (applications; null for others). */
  fqdn: string | null;
  createdAt: Date;
  projectUuid: string;
  environmentName: string;
}

/** The engine's view of the server now (containers.list), or why there is none. */
export type LiveView = { live: true; at: Date; containers: ManagedContainer[] } | { live: false; lastSeenAt: Date | null };

export interface ServerResourceView {
  uuid: string;
  name: string;
  type: string;
  status: string;
  /** true: the status is the last one reported (the agent is away or did not answer); false: confirmed by the engine now. */
  stale: boolean;
  /** When the status was last known to hold: now when live; the agent's last contact when stale (null: never reported since the resource was created). */
  lastSeenAt: Date | null;
  projectUuid: string;
  environmentName: string;
}

export interface ServerDomainView {
  domain: string;
  resourceUuid: string;
  resourceName: string;
  resourceType: string;
  /** Whether a container of the resource serves the domain now; null when the engine's view is not available. */
  routed: boolean | null;
  stale: boolean;
  lastSeenAt: Date | null;
}

type Row = [kind: string, uuid: string, name: string, status: string, engine: string | null, fqdn: string | null, createdAt: unknown, projectUuid: string, environmentName: string];

/**
 * The stored resources of a server that the caller may see, in one statement (applications
 * then databases, each by id). The server must have been resolved through the scope already.
 */
export async function storedResources(reader: SqlReader, scope: TeamScope, serverId: number): Promise<StoredResource[]> {
  const apps = scope.visibleRows(`a."teamId"`, "environment");
  const dbs = scope.visibleRows(`d."teamId"`, "environment");
  const sql = `SELECT * FROM (
      SELECT 'application' AS "kind", a."uuid", a."name", a."status", NULL AS "engine", a."fqdn", a."createdAt", p."uuid" AS "projectUuid", e."name" AS "environmentName", 0 AS "o", a."id" AS "id"
        FROM "Application" a JOIN "Environment" e ON e."id" = a."environmentId" JOIN "Project" p ON p."id" = e."projectId"
       WHERE a."serverId" = ? AND ${apps.sql}
      UNION ALL
      SELECT 'database', d."uuid", d."name", d."status", d."engine", NULL, d."createdAt", p."uuid", e."name", 1, d."id"
        FROM "StandaloneDatabase" d JOIN "Environment" e ON e."id" = d."environmentId" JOIN "Project" p ON p."id" = e."projectId"
       WHERE d."serverId" = ? AND ${dbs.sql}
    ) r ORDER BY r."o", r."id"`;
  const rows = await reader.rows<[...Row, unknown, unknown]>(sql, [serverId, ...apps.params, serverId, ...dbs.params]);
  return rows.map(([kind, uuid, name, status, engine, fqdn, createdAt, projectUuid, environmentName]) => ({
    uuid,
    name,
    type: kind === "database" ? typeOfDatabase(engine) : RESOURCE_TYPE_APPLICATION,
    status,
    fqdn,
    createdAt: toDate(createdAt),
    projectUuid,
    environmentName,
  }));
}

/**
 * How many of those stored resources each server has (what storedResources lists for it), for
 * a page of the server list (the dashboard's Fleet page): one grouped statement per
 * PADDED_IN_MAX servers, not one per server. A server without any is absent from the map.
 */
export async function storedResourceCounts(reader: SqlReader, scope: TeamScope, serverIds: number[]): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  for (const page of chunks(serverIds, PADDED_IN_MAX)) {
    const { list, values } = paddedIn(page, -1);
    const apps = scope.visibleRows(`a."teamId"`, "environment");
    const dbs = scope.visibleRows(`d."teamId"`, "environment");
    const sql = `SELECT r."serverId", COUNT(*) AS "n" FROM (
        SELECT a."serverId" FROM "Application" a JOIN "Environment" e ON e."id" = a."environmentId" WHERE a."serverId" IN (${list}) AND ${apps.sql}
        UNION ALL
        SELECT d."serverId" FROM "StandaloneDatabase" d JOIN "Environment" e ON e."id" = d."environmentId" WHERE d."serverId" IN (${list}) AND ${dbs.sql}
      ) r GROUP BY r."serverId"`;
    const rows = await reader.rows<[unknown, unknown]>(sql, [...values, ...apps.params, ...values, ...dbs.params]);
    for (const [serverId, n] of rows) counts.set(toInt(serverId), toInt(n));
  }
  return counts;
}

function typeOfDatabase(engine: string | null): string {
  const e = DatabaseEngine.safeParse(engine);
  return e.success ? databaseType(e.data) : "database";
}

const containersOf = (view: LiveView, uuid: string) => (view.live ? view.containers.filter((c) => c.labels[LABEL_RESOURCE_UUID] === uuid) : []);

/** The last time the stored status can have been true: the agent's last contact, unless the resource is newer. */
function staleSince(view: Extract<LiveView, { live: false }>, r: StoredResource): Date | null {
  return view.lastSeenAt && view.lastSeenAt >= r.createdAt ? view.lastSeenAt : null;
}

/**
 * GET /servers/{uuid}/resources: each stored resource with its last known status. With the
 * engine's view, a resource the engine runs no container of is `exited` now (the agent's reports
 * say so too, a moment later); otherwise its status is the one the agent reported, which its
 * event stream keeps current while it is connected.
 */
export function serverResources(rows: StoredResource[], view: LiveView): ServerResourceView[] {
  return rows.map((r) => {
    const base = { uuid: r.uuid, name: r.name, type: r.type, projectUuid: r.projectUuid, environmentName: r.environmentName };
    if (!view.live) return { ...base, status: r.status, stale: true, lastSeenAt: staleSince(view, r) };
    return { ...base, status: containersOf(view, r.uuid).length ? r.status : "exited", stale: false, lastSeenAt: view.at };
  });
}

/**
 * GET /servers/{uuid}/domains: every host of every stored resource's configured domains (one
 * item per resource and host). With the engine's view, routed says whether a container of the
 * resource carries the host now (it was deployed with it).
 */
export function serverDomains(rows: StoredResource[], view: LiveView): ServerDomainView[] {
  const out: ServerDomainView[] = [];
  for (const r of rows) {
    if (!r.fqdn) continue;
    const parsed = parseDomains(r.fqdn);
    if (!("entries" in parsed)) continue;
    const served = new Set(
      containersOf(view, r.uuid).flatMap((c) =>
        (c.labels[LABEL_DOMAINS] ?? "")
          .split(",")
          .map((d) => d.trim().toLowerCase())
          .filter(Boolean),
      ),
    );
    for (const host of new Set(parsed.entries.map((e) => e.host))) {
      out.push({
        domain: host,
        resourceUuid: r.uuid,
        resourceName: r.name,
        resourceType: r.type,
        routed: view.live ? served.has(host) : null,
        stale: !view.live,
        lastSeenAt: view.live ? view.at : staleSince(view, r),
      });
    }
  }
  return out;
}
