import type { ResolvedRoute, RouteDirectives } from "./select.js";

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
  /** The host port HTTP is published on (default 80): a `proxy.redirect` to an http-only host names it unless it is 80. */
  httpPort?: number;
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

  const ctx: RouteContext = { httpsHosts, httpsPort: opts.httpsPort, httpPort: opts.httpPort ?? 80 };
  const route = (r: ResolvedRoute) => proxyRoute(r, ctx);
  const httpRoutes: Json[] = plain.map(route);
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
            routes: [...secure.map(route), NOT_FOUND],
          },
          http: { listen: [":80"], routes: httpRoutes },
        },
      },
      // Names on Caddy's internal CA: do not try to install its root into the container's trust store.
      pki: { certificate_authorities: { local: { install_trust: false } } },
    },
  };
}

interface RouteContext {
  httpsHosts: ReadonlySet<string>;
  httpsPort: number;
  httpPort: number;
}

function proxyRoute(r: ResolvedRoute, ctx: RouteContext): Json {
  const match: { [k: string]: Json } = { host: [r.host] };
  if (r.path !== "/") match.path = [r.path, `${r.path}/*`];
  const upstream: Json = {
    handler: "reverse_proxy",
    upstreams: [{ dial: r.dial }],
    // A stopped upstream fails fast instead of holding the client until its own timeout.
    transport: { protocol: "http", dial_timeout: "5s" },
  };
  return { match: [match], handle: r.directives ? [...directiveHandlers(r.directives, ctx), ...(r.directives.redirect_to ? [] : [upstream])] : [upstream], terminal: true };
}

/**
 * The handlers a route's `proxy.*` labels add in front of its reverse_proxy, in this order:
 * headers (first, so they are on the application's answers and on a redirect; not on basic
 * auth's 401, which Caddy writes as an error past the deferred headers), then the redirect
 * (which ends the route), compression, basic auth. Every value in them was checked by
 * parseProxyLabels (shared/src/protocol/proxy-labels.ts): no braces, so no Caddy placeholder
 * in a user's value expands.
 */
function directiveHandlers(d: RouteDirectives, ctx: RouteContext): Json[] {
  const out: Json[] = [];
  const ops = (set: Record<string, string>) => {
    const names = Object.keys(set).sort();
    const op: { [k: string]: Json } = {};
    const setting = names.filter((n) => set[n] !== "");
    const deleting = names.filter((n) => set[n] === "");
    if (setting.length) op.set = Object.fromEntries(setting.map((n) => [n, [set[n]!]]));
    if (deleting.length) op.delete = deleting;
    return op;
  };
  const headers: { [k: string]: Json } = {};
  if (Object.keys(d.request_headers).length) headers.request = ops(d.request_headers);
  // Deferred: applied when the response is written, so a header the upstream sends is replaced
  // (or removed) rather than doubled.
  if (Object.keys(d.response_headers).length) headers.response = { ...ops(d.response_headers), deferred: true };
  if (Object.keys(headers).length) out.push({ handler: "headers", ...headers });
  if (d.redirect_to) {
    const https = ctx.httpsHosts.has(d.redirect_to);
    const port = https ? (ctx.httpsPort === 443 ? "" : `:${ctx.httpsPort}`) : ctx.httpPort === 80 ? "" : `:${ctx.httpPort}`;
    out.push({ handler: "static_response", status_code: 308, headers: { Location: [`${https ? "https" : "http"}://${d.redirect_to}${port}{http.request.uri}`] } });
    return out;
  }
  if (d.encode.length) out.push({ handler: "encode", encodings: Object.fromEntries(d.encode.map((e) => [e, {}])), prefer: [...d.encode] });
  if (d.basic_auth.length) {
    out.push({
      handler: "authentication",
      providers: {
        http_basic: {
          hash: { algorithm: "bcrypt" },
          // Base64 of the hash: the form every Caddy 2 release reads (2.6 only reads that one;
          // later ones also take the hash as it is).
          accounts: d.basic_auth.map((a) => ({ username: a.user, password: Buffer.from(a.hash, "utf8").toString("base64") })),
        },
      },
    });
  }
  return out;
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
