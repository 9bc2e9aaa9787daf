import type { ResolvedRoute } from "./select.js";

/**
 * Where Caddy's admin API listens: the loopback of the proxy container's own network namespace.
 * Nothing outside that namespace (application containers on the shared networks, the host, the
 * internet) can connect to it; the agent reaches it only by `docker exec` into the container.
 * The proxy container is created with CADDY_ADMIN set to the same address, and every config
 * loaded repeats it (a config without it would move the admin API back to Caddy's default).
 */
export const ADMIN_LISTEN = "127.0.0.1:2019";

export interface RenderOptions {
  /** The host port HTTPS is published on: the HTTP->HTTPS redirect must name it unless it is 443. */
  httpsPort: number;
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const NOT_FOUND: Json = {
  handle: [{ handler: "static_response", status_code: 404, body: "No application is served at this address.\n" }],
};

/**
 * The whole Caddy JSON config for a route table. Two servers, so that which names get HTTPS
 * is decided here and not by Caddy's heuristics:
 *  - "https" (:443) holds the https routes; Caddy's automatic HTTPS manages their certificates
 *    (ACME for public names, its internal CA for localhost, *.localhost, *.local and IPs).
 *    Its automatic redirects are off because we render our own (they must name the published
 *    port, and must not touch http-only names).
 *  - "http" (:80) serves the plain-HTTP routes, redirects every https host to HTTPS, and answers
 *    404 for anything else. Caddy applies no automatic HTTPS to a server that listens only on
 *    the HTTP port, so http-only names never trigger certificate requests. ACME HTTP-01
 *    challenges are still answered there (Caddy handles them before any route).
 * A host that has any https route is https for all its paths.
 * An unknown host gets 404 on HTTP; a route whose container is gone gets 502 (dial fails fast).
 */
export function renderCaddyConfig(routes: readonly ResolvedRoute[], opts: RenderOptions): Json {
  const httpsHosts = new Set(routes.filter((r) => r.https).map((r) => r.host));
  const ordered = [...routes].sort(
    (a, b) => a.host.localeCompare(b.host) || b.path.length - a.path.length || a.path.localeCompare(b.path),
  );
  const secure = ordered.filter((r) => httpsHosts.has(r.host));
  const plain = ordered.filter((r) => !httpsHosts.has(r.host));

  const httpRoutes: Json[] = plain.map(proxyRoute);
  if (httpsHosts.size > 0) {
    const port = opts.httpsPort === 443 ? "" : `:${opts.httpsPort}`;
    httpRoutes.push({
      match: [{ host: [...httpsHosts].sort() }],
      handle: [
        {
          handler: "static_response",
          status_code: 308,
          headers: { Location: [`https://{http.request.host}${port}{http.request.uri}`] },
        },
      ],
      terminal: true,
    });
  }
  httpRoutes.push(NOT_FOUND);

  return {
    admin: { listen: ADMIN_LISTEN },
    apps: {
      http: {
        http_port: 80,
        https_port: 443,
        servers: {
          https: {
            listen: [":443"],
            automatic_https: { disable_redirects: true },
            routes: [...secure.map(proxyRoute), NOT_FOUND],
          },
          http: { listen: [":80"], routes: httpRoutes },
        },
      },
      // Names on Caddy's internal CA: do not try to install its root into the container's trust store.
      pki: { certificate_authorities: { local: { install_trust: false } } },
    },
  };
}

function proxyRoute(r: ResolvedRoute): Json {
  const match: { [k: string]: Json } = { host: [r.host] };
  if (r.path !== "/") match.path = [r.path, `${r.path}/*`];
  return {
    match: [match],
    handle: [
      {
        handler: "reverse_proxy",
        upstreams: [{ dial: r.dial }],
        // A stopped upstream fails fast instead of holding the client until its own timeout.
        transport: { protocol: "http", dial_timeout: "5s" },
      },
    ],
    terminal: true,
  };
}

/** JSON with object keys sorted at every level: equal configs give equal strings. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) out[k] = sortKeys((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}
