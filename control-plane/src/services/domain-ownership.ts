import { MAX_OWNERSHIP_HOSTS, hostsOverlap, parseDomains, type DomainEntry, type RouteOwnership } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import type { EnvironmentRef, TeamScope } from "../domain/scope.js";
import { Conflict } from "../domain/errors.js";

type Tx = Prisma.TransactionClient;

/**
 * Domains of applications: who may claim a host, and who may serve it on a server.
 *
 * - A host belongs to one project of the team (whichever of its servers runs the resource):
 *   a host already used by a resource of another project is refused, on create and on PATCH,
 *   whatever the path. A wildcard `*.example.com` counts as every host it covers.
 * - Inside the project, another path under a host already in use may be added only by a caller
 *   who may manage every application already serving that host (so nobody can put a path in
 *   front of an application it may not change, e.g. `/login` under someone else's site).
 * - The same host and path is served by one application per server (the proxy could not tell
 *   two apart); the same project may serve it from two servers (DNS decides which one answers).
 *
 * The proxy enforces the host rule again on every sync from the ownership table below, so a
 * container's labels (stale, or from before a host moved) cannot serve a host given to another
 * project. docs/proxy.md and docs/decisions.md say the same for operators.
 */

const entriesOf = (fqdn: string | null): DomainEntry[] => {
  if (!fqdn) return [];
  const r = parseDomains(fqdn);
  return "entries" in r ? r.entries : [];
};

const spot = (e: { host: string; path: string }) => `${e.host}${e.path === "/" ? "" : e.path}`;

/**
 * The resource claiming domains: an application (its id, none yet on create) or a service
 * application (componentId: the ServiceComponent), its server and environment.
 */
export interface Claimant {
  id?: number;
  /** w7/svcroute: a service application claims them (its ServiceComponent id). */
  componentId?: number;
  serverId: number;
  environment: EnvironmentRef;
}

/** Another resource serving domains: an application or a service application (w7/svcroute). */
interface OtherClaim {
  what: "application" | "service application";
  name: string;
  serverId: number;
  fqdn: string | null;
  environment: EnvironmentRef & { project: { name: string } };
}

const ENV_SELECT = { select: { id: true, projectId: true, project: { select: { name: true } } } } as const;

/**
 * The team's other claims: its applications' and its service applications' domains (the host
 * rule is one for both kinds: a host used by one cannot be taken by the other).
 */
async function otherClaims(db: Db | Tx, scope: TeamScope, app: Claimant): Promise<OtherClaim[]> {
  const apps = await db.application.findMany({
    where: { teamId: scope.teamId, fqdn: { not: null }, ...(app.id !== undefined ? { id: { not: app.id } } : {}) },
    select: { id: true, name: true, serverId: true, fqdn: true, environment: ENV_SELECT },
    orderBy: { id: "asc" },
  });
  const components = await db.serviceComponent.findMany({
    where: { service: { teamId: scope.teamId }, fqdn: { not: null }, ...(app.componentId !== undefined ? { id: { not: app.componentId } } : {}) },
    select: { name: true, fqdn: true, service: { select: { name: true, serverId: true, environment: ENV_SELECT } } },
    orderBy: { id: "asc" },
  });
  return [
    ...apps.map((a) => ({ what: "application" as const, name: a.name, serverId: a.serverId, fqdn: a.fqdn, environment: a.environment })),
    ...components.map((c) => ({ what: "service application" as const, name: `${c.name} of service ${c.service.name}`, serverId: c.service.serverId, fqdn: c.fqdn, environment: c.service.environment })),
  ];
}

/**
 * Throws Conflict (409) when `fqdn` claims a host or path the rules above give to someone else.
 * Another application is named only when the caller may see it; otherwise the message says
 * what collides without saying whose it is.
 */
export async function assertDomainsFree(db: Db | Tx, scope: TeamScope, app: Claimant, fqdn: string | null): Promise<void> {
  const wanted = entriesOf(fqdn);
  if (!wanted.length) return;
  const others = await otherClaims(db, scope, app);
  for (const other of others) {
    const theirs = entriesOf(other.fqdn);
    for (const w of wanted) {
      const hit = theirs.find((o) => hostsOverlap(o.host, w.host));
      if (!hit) continue;
      const visible = await scope.canSeeEnvironment(other.environment);
      const who = visible ? `${other.what} ${other.name}` : "another resource";
      const exact = theirs.find((o) => o.host === w.host && o.path === w.path);
      if (exact && other.serverId === app.serverId) {
        throw new Conflict(`${spot(w)} is already served by ${who} on this server.`);
      }
      const what = hit.host === w.host ? w.host : `${w.host} (overlapping ${hit.host})`;
      if (other.environment.projectId !== app.environment.projectId) {
        throw new Conflict(
          `${what} is already used by ${visible ? `${other.what} ${other.name} of project ${other.environment.project.name}` : "a resource of another project"}: ` +
            "a host belongs to one project; choose another host.",
        );
      }
      if (!(await scope.allows(other.environment, "manage"))) {
        throw new Conflict(
          `${what} is already served by ${who}, which you may not manage: another path under a host can be added only by someone who may manage every application serving it.`,
        );
      }
    }
  }
}

/** The hosts `fqdn` names, once each: the ApplicationHost (or ServiceComponentHost) rows stored with it (see routeOwnership). */
function hostsOf(fqdn: string | null): string[] {
  return [...new Set(entriesOf(fqdn).map((e) => e.host))];
}

/** Nested writes that store an application's hosts with its fqdn, in the same statement as it. */
export const hostsOnCreate = (fqdn: string | null) => ({ create: hostsOf(fqdn).map((host) => ({ host })) });
export const hostsOnUpdate = (fqdn: string | null) => ({ deleteMany: {}, ...hostsOnCreate(fqdn) });

interface Claim {
  host: string;
  /** "a": an application's claim (id: the application); "s": a service application's (id: its service). */
  kind: string;
  id: number;
  uuid: string;
  serverId: number;
  projectId: number;
}

/**
 * The ownership table of one server for its proxy (protocol/routing.ts): each host claimed on
 * the server goes to the project of the oldest application of the team claiming it (the only
 * one, unless records from before this rule disagree; applications' claims count before
 * service applications', which came later), with that project's resources on the server:
 * applications, and services (by the service's uuid, which its containers carry as
 * capstan.resource.uuid). `excluding` / `excludingServices`: applications or services being
 * removed (the table the proxy gets with their removal is the one after it). undefined when
 * the table would be too large to send (the proxy then routes by labels).
 *
 * It runs on every deploy and action job, so it reads only what it needs, in one statement through
 * indexes (ApplicationHost's and ServiceComponentHost's host index, Application's and Service's
 * serverId index): the claims, by the server's team, of the hosts claimed on the server. The
 * team's other applications and services are not read (test/api/domain-ownership.test.ts
 * counts, and checks SQLite's plan). CROSS JOIN fixes SQLite's join order (it means an inner
 * join, planned freely, on PostgreSQL): without statistics SQLite would start from every
 * application of the team (the teamId index) and probe their hosts. Claims of excluded
 * resources come back too (so the statement stays one text without an id list) and are skipped here.
 */
export async function routeOwnership(
  db: Db | Tx,
  serverId: number,
  opts: { excluding?: number[]; excludingServices?: number[]; now?: number } = {},
): Promise<RouteOwnership | undefined> {
  const now = opts.now ?? Date.now();
  const excluded = new Set((opts.excluding ?? []).map((id) => `a${id}`));
  for (const id of opts.excludingServices ?? []) excluded.add(`s${id}`);
  const claims = await db.$queryRaw<Claim[]>`
    SELECT h."host" AS "host", 'a' AS "kind", a."id" AS "id", a."uuid" AS "uuid", a."serverId" AS "serverId", e."projectId" AS "projectId"
      FROM "ApplicationHost" h CROSS JOIN "Application" a CROSS JOIN "Environment" e CROSS JOIN "Server" s
     WHERE h."host" IN (
             SELECT h2."host" FROM "ApplicationHost" h2 JOIN "Application" a2 ON a2."id" = h2."applicationId" WHERE a2."serverId" = ${serverId}
             UNION ALL
             SELECT h3."host" FROM "Service" sv3 CROSS JOIN "ServiceComponent" c3 CROSS JOIN "ServiceComponentHost" h3
              WHERE sv3."serverId" = ${serverId} AND c3."serviceId" = sv3."id" AND h3."componentId" = c3."id")
       AND a."id" = h."applicationId" AND e."id" = a."environmentId" AND s."id" = ${serverId} AND a."teamId" = s."teamId"
    UNION ALL
    SELECT h."host", 's', sv."id", sv."uuid", sv."serverId", e."projectId"
      FROM "ServiceComponentHost" h CROSS JOIN "ServiceComponent" c CROSS JOIN "Service" sv CROSS JOIN "Environment" e CROSS JOIN "Server" s
     WHERE h."host" IN (
             SELECT h2."host" FROM "ApplicationHost" h2 JOIN "Application" a2 ON a2."id" = h2."applicationId" WHERE a2."serverId" = ${serverId}
             UNION ALL
             SELECT h3."host" FROM "Service" sv3 CROSS JOIN "ServiceComponent" c3 CROSS JOIN "ServiceComponentHost" h3
              WHERE sv3."serverId" = ${serverId} AND c3."serviceId" = sv3."id" AND h3."componentId" = c3."id")
       AND c."id" = h."componentId" AND sv."id" = c."serviceId" AND e."id" = sv."environmentId" AND s."id" = ${serverId} AND sv."teamId" = s."teamId"
     ORDER BY 2, 3, 1`;
  const ownerOf = new Map<string, number>(); // host -> project id (oldest claim wins)
  const here = new Set<string>(); // hosts claimed on this server
  const resources = new Map<number, string[]>(); // project id -> its resources on this server
  const listed = new Set<string>();
  for (const c of claims) {
    // Raw rows come as the driver gives them: Number() whatever the integer type.
    const key = `${c.kind}${Number(c.id)}`;
    const projectId = Number(c.projectId);
    if (excluded.has(key)) continue;
    if (!ownerOf.has(c.host)) ownerOf.set(c.host, projectId);
    if (Number(c.serverId) !== serverId) continue;
    here.add(c.host);
    if (listed.has(key)) continue;
    listed.add(key);
    const list = resources.get(projectId) ?? [];
    list.push(c.uuid);
    resources.set(projectId, list);
  }
  if (here.size > MAX_OWNERSHIP_HOSTS) return undefined;
  const byProject = new Map<number, { resources: string[]; hosts: string[] }>();
  for (const h of [...here].sort()) {
    const project = ownerOf.get(h)!;
    let entry = byProject.get(project);
    if (!entry) byProject.set(project, (entry = { resources: resources.get(project) ?? [], hosts: [] }));
    entry.hosts.push(h);
  }
  return { generation: now, projects: [...byProject.values()] };
}
