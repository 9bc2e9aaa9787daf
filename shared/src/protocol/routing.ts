import { z } from "zod";
import { DomainName } from "../validation/inputs.js";

/**
 * Host ownership: a host name belongs to one project of a team. Only that project's resources
 * may serve it (any of its paths); the control plane checks this when a domain is claimed
 * (services/domain-ownership.ts) and tells every proxy sync who owns what (RouteOwnership), so
 * the agent's proxy never lets a container's labels serve a host the control plane gave to
 * another project: a stale label, a container left over from before a domain moved, a path
 * under someone else's host that longest-prefix routing would otherwise hand to it.
 */

/**
 * Whether `pattern` covers `host` the way the proxy (Caddy) matches a host: equal, or a wildcard
 * `*.example.com` standing for exactly one more label (`a.example.com`, not `a.b.example.com`).
 * Both lower case (DomainName and parseDomains lower-case every host).
 */
export function hostCovers(pattern: string, host: string): boolean {
  if (pattern === host) return true;
  if (!pattern.startsWith("*.")) return false;
  const suffix = pattern.slice(1); // ".example.com"
  if (!host.endsWith(suffix)) return false;
  const label = host.slice(0, host.length - suffix.length);
  return label.length > 0 && !label.includes(".") && label !== "*";
}

/** Whether a request could match both hosts: equal, or one is a wildcard covering the other. */
export function hostsOverlap(a: string, b: string): boolean {
  return hostCovers(a, b) || hostCovers(b, a);
}

const ResourceUuid = z.string().regex(/^[a-z0-9-]{1,64}$/);

/**
 * Who may serve which host on one server, as the control plane sees it when it writes a job:
 * per owning project, the hosts it owns that are claimed on this server and its resources on
 * this server. A host listed here is served only by resources of the same entry; a host not
 * listed (no resource of the server claims it) is served as the labels say. `generation` orders
 * tables written by different requests or replicas (milliseconds of the control plane's clock):
 * the agent keeps the newest it has seen, so a job written earlier and run later cannot bring
 * back an older view.
 */
export const RouteOwnership = z.object({
  generation: z.number().int().nonnegative(),
  projects: z
    .array(
      z.object({
        resources: z.array(ResourceUuid).max(5_000),
        hosts: z.array(DomainName).max(20_000),
      }),
    )
    .max(5_000),
});
export type RouteOwnership = z.infer<typeof RouteOwnership>;

/** The larger tables are not sent (RouteOwnership's limits): the proxy then routes by labels alone. */
export const MAX_OWNERSHIP_HOSTS = 20_000;

/** The ownership table as lookups: host -> owner index, resource uuid -> owner index. */
export interface OwnershipIndex {
  hosts: Map<string, number>;
  resources: Map<string, number>;
}

export function indexOwnership(table: RouteOwnership): OwnershipIndex {
  const hosts = new Map<string, number>();
  const resources = new Map<string, number>();
  table.projects.forEach((p, i) => {
    for (const h of p.hosts) if (!hosts.has(h)) hosts.set(h, i);
    for (const r of p.resources) if (!resources.has(r)) resources.set(r, i);
  });
  return { hosts, resources };
}

/**
 * The listed host that `host` (as a resource's route names it) collides with while it belongs to
 * another owner than `resource`'s, or null when the resource may serve it (its own project's
 * host, or a host nobody listed).
 */
export function foreignHost(index: OwnershipIndex, resource: string, host: string): string | null {
  const mine = index.resources.get(resource);
  const exact = index.hosts.get(host);
  if (exact !== undefined) return exact === mine ? null : host;
  for (const [listed, owner] of index.hosts) {
    if (owner !== mine && hostsOverlap(listed, host)) return listed;
  }
  return null;
}
