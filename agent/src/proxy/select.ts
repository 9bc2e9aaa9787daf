import {
  Port,
  ProxyRoute,
  LABEL_PROXY_NETWORK,
  LABEL_PROXY_PORT,
  LABEL_PROXY_ROUTES,
  LABEL_RESOURCE_UUID,
  LABEL_ROLLOUT,
  LABEL_SERVICE_COMPONENT,
  foreignHost,
  indexOwnership,
  parseProxyLabels,
  hasDirectives,
  PROXY_LABEL,
  type ProxyDirectives,
  type RouteOwnership,
} from "@capstan/shared";
import { z } from "zod";

/** What the selection needs to know about one managed container. */
export interface Candidate {
  name: string;
  running: boolean;
  /** healthy, unhealthy, starting; null when the container has no health check */
  health: string | null;
  labels: Record<string, string>;
  /** Networks it is attached to; when known, a route over a network it is not on is skipped. */
  networks?: string[];
}

/** One route the proxy serves: requests for host (+ path prefix) go to dial. */
export interface ResolvedRoute {
  host: string;
  /** "/" for the whole host, else a prefix such as "/api" (no trailing slash). */
  path: string;
  https: boolean;
  /**
   * `<container name>.<network>:<port>`: Docker's DNS answers `<name>.<network>` with the
   * container's address on that network only, so traffic takes the network the container's
   * capstan.proxy.network label names even when the proxy shares several with it.
   * `<container name>:<port>` for a container without that label.
   */
  dial: string;
  resource: string;
  container: string;
  /** What the container's `proxy.*` labels add to this route (docs/proxy-labels.md); absent: none. */
  directives?: RouteDirectives;
}

/** A route's directives: the container's, with its redirect resolved to one of its own hosts. */
export interface RouteDirectives extends Omit<ProxyDirectives, "redirect" | "network"> {
  /** Requests for this route's host are redirected to this host (one the same resource is routed for). */
  redirect_to: string | null;
}

export interface Selection {
  routes: ResolvedRoute[];
  /** Why a container or route was left out; shown as job progress, never fatal. */
  warnings: string[];
}

const RouteList = z.array(ProxyRoute).max(100);
const DOCKER_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}$/;
const IPV4_LIKE = /^[0-9.]+$/;
/** Network names usable as the domain part of an upstream host (lower case: DNS names are compared case-insensitively, Docker names are not). */
const QUALIFIABLE_NETWORK = /^[a-z0-9][a-z0-9_.-]{0,127}$/;

/**
 * Upstream hosts are container names. A container named "localhost" or like an IP address
 * would make the proxy dial itself (its admin API listens on its own loopback) or an
 * arbitrary address, so such names never become upstreams.
 */
export function isSafeUpstreamName(name: string): boolean {
  return DOCKER_NAME.test(name) && !IPV4_LIKE.test(name) && name.toLowerCase() !== "localhost" && !name.toLowerCase().startsWith("localhost.");
}

/** A container whose traffic may be switched to it: running, and healthy unless it has no check. */
export function isServing(c: Candidate): boolean {
  return c.running && (c.health === null || c.health === "healthy");
}

/**
 * Within one rollout (the services of a compose deployment share it), the container carrying
 * routes wins over its siblings without; then the greater name, so the choice is stable.
 */
function tieBreak(c: Candidate, best: Candidate): boolean {
  if (hasRoutes(c) !== hasRoutes(best)) return hasRoutes(c);
  return c.name > best.name;
}

function hasRoutes(c: Candidate): boolean {
  const raw = c.labels[LABEL_PROXY_ROUTES];
  return raw !== undefined && raw !== "" && raw !== "[]";
}

function rolloutOf(c: Candidate): number {
  const n = Number(c.labels[LABEL_ROLLOUT]);
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}

/** "/api/" and "/api" are one prefix; a query part has no meaning for routing and is dropped. */
export function normalisePrefix(path: string): string {
  const p = path.split("?")[0]!.replace(/\/+$/, "");
  return p === "" ? "/" : p;
}

/**
 * The proxy selection rule: per capstan.resource.uuid (and per capstan.service.component for a service's containers), among serving containers (running,
 * health healthy or absent), the one with the highest capstan.rollout receives that resource's
 * routes (ties: the one with routes, then the greater name, so the choice is stable). Its labels say the routes, the
 * upstream port and the network; a container the proxy cannot reach on one of `networks` is
 * skipped. A host+path claimed by two resources goes to the smaller resource uuid.
 *
 * With the control plane's `ownership` table (protocol/routing.ts), a route whose host the
 * table gives to another project than the resource's (or to anyone, for a resource the table
 * does not know) is skipped: labels never let a container serve, or put a path in front of,
 * a host the control plane gave to someone else.
 */
export function selectRoutes(candidates: Candidate[], networks: readonly string[], ownership?: RouteOwnership): Selection {
  const warnings: string[] = [];
  const owners = ownership ? indexOwnership(ownership) : null;
  // Keyed by resource, and for a service by component too (capstan.service.component): each of a
  // service's components is its own container with its own routes (w6/svcproxy). The resource
  // uuid alone decides ownership and clashes.
  const winners = new Map<string, Candidate>();
  for (const c of candidates) {
    const resource = c.labels[LABEL_RESOURCE_UUID];
    if (!resource || !isServing(c)) continue;
    const component = c.labels[LABEL_SERVICE_COMPONENT];
    const key = component ? `${resource}/${component}` : resource;
    const best = winners.get(key);
    if (!best || rolloutOf(c) > rolloutOf(best) || (rolloutOf(c) === rolloutOf(best) && tieBreak(c, best))) {
      winners.set(key, c);
    }
  }

  const routes: ResolvedRoute[] = [];
  const claimed = new Map<string, string>();
  for (const key of [...winners.keys()].sort()) {
    const c = winners.get(key)!;
    const resource = c.labels[LABEL_RESOURCE_UUID]!;
    const rawRoutes = c.labels[LABEL_PROXY_ROUTES];
    if (rawRoutes === undefined || rawRoutes === "" || rawRoutes === "[]") continue;
    const parsedRoutes = parseRoutes(rawRoutes);
    if (!parsedRoutes) {
      warnings.push(`container ${c.name}: label ${LABEL_PROXY_ROUTES} is not a valid route list; not routed`);
      continue;
    }
    const port = Port.safeParse(Number(c.labels[LABEL_PROXY_PORT]));
    if (!port.success) {
      warnings.push(`container ${c.name}: label ${LABEL_PROXY_PORT} is missing or not a port; not routed`);
      continue;
    }
    if (!isSafeUpstreamName(c.name)) {
      warnings.push(`container ${c.name}: its name cannot be used as an upstream host; not routed`);
      continue;
    }
    // The user-facing labels (docs/proxy-labels.md): a bad one is reported and left out, the
    // route is served without it. They only shape this resource's own routes: hosts still come
    // from capstan.proxy.routes and the ownership table alone.
    const user = parseProxyLabels(c.labels);
    for (const p of user.problems) warnings.push(`container ${c.name}: ${p}`);
    // Spec section 1, rule 9: the user's routing network wins over the automatic one.
    let network = user.directives.network ?? c.labels[LABEL_PROXY_NETWORK];
    if (network && !networks.includes(network)) {
      // The label was written under other network settings (proxy isolation switched off since,
      // say). A network both are on still reaches it without widening anything, so routing
      // does not stop until the container is redeployed with the label the settings give now.
      const common = c.networks?.find((n) => networks.includes(n));
      if (!common) {
        warnings.push(`container ${c.name}: network ${network} is not one the proxy joins; not routed`);
        continue;
      }
      warnings.push(`container ${c.name}: network ${network} is not one the proxy joins; routed on ${common} until it is redeployed`);
      network = common;
    }
    if (network && c.networks && !c.networks.includes(network)) {
      warnings.push(`container ${c.name}: it is not attached to network ${network} (its ${user.directives.network ? PROXY_LABEL.network : LABEL_PROXY_NETWORK} label); not routed`);
      continue;
    }
    const upstream = network && QUALIFIABLE_NETWORK.test(network) ? `${c.name}.${network}` : c.name;
    const mine: ResolvedRoute[] = [];
    for (const r of parsedRoutes) {
      const path = normalisePrefix(r.path);
      const foreign = owners ? foreignHost(owners, resource, r.host) : null;
      if (foreign !== null) {
        warnings.push(`container ${c.name}: ${r.host}${path === "/" ? "" : path} is not routed: the control plane gives ${foreign} to another resource's project`);
        continue;
      }
      const key = `${r.host} ${path}`;
      const owner = claimed.get(key);
      if (owner !== undefined) {
        if (owner !== resource) warnings.push(`${r.host}${path === "/" ? "" : path} is claimed by ${owner} and ${resource}; kept for ${owner}`);
        continue;
      }
      claimed.set(key, resource);
      mine.push({ host: r.host, path, https: r.https, dial: `${upstream}:${port.data}`, resource, container: c.name });
    }
    if (hasDirectives(user.directives)) applyDirectives(mine, user.directives, (w) => warnings.push(`container ${c.name}: ${w}`));
    routes.push(...mine);
  }
  return { routes, warnings };
}

/**
 * Gives each of one resource's routes the container's directives. A redirect goes between two
 * hosts the resource itself is routed for (www.example.com and example.com), so a label can
 * never point the proxy at, or answer for, a host it was not given.
 */
function applyDirectives(routes: ResolvedRoute[], d: ProxyDirectives, warn: (line: string) => void): void {
  const hosts = new Set(routes.map((r) => r.host));
  let redirected = 0;
  for (const r of routes) {
    let to: string | null = null;
    if (d.redirect === "to-apex" && r.host.startsWith("www.") && hosts.has(r.host.slice(4))) to = r.host.slice(4);
    if (d.redirect === "to-www" && !r.host.startsWith("www.") && hosts.has(`www.${r.host}`)) to = `www.${r.host}`;
    if (to !== null) redirected++;
    r.directives = { basic_auth: d.basic_auth, request_headers: d.request_headers, response_headers: d.response_headers, encode: d.encode, redirect_to: to };
  }
  if (d.redirect !== null && redirected === 0 && routes.length > 0) {
    warn(`label ${PROXY_LABEL.redirect}=${d.redirect}: needs both a host and its www. twin among this resource's domains; ignored`);
  }
}

function parseRoutes(raw: string): ProxyRoute[] | null {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return null;
  }
  const parsed = RouteList.safeParse(json);
  return parsed.success ? parsed.data : null;
}
