import { describe, expect, it } from "vitest";
import { ADMIN_LISTEN, canonicalJson, renderCaddyConfig } from "./render.js";
import type { ResolvedRoute } from "./select.js";

const route = (host: string, https: boolean, path = "/", dial = "c:80"): ResolvedRoute => ({ host, https, path, dial, resource: "r", container: dial.split(":")[0]! });

type Cfg = {
  admin: { listen: string };
  apps: { http: { servers: Record<string, { listen: string[]; automatic_https?: unknown; routes: Route[] }> } };
};
type Route = { match?: { host?: string[]; path?: string[] }[]; handle: Record<string, unknown>[]; terminal?: boolean };

const render = (routes: ResolvedRoute[], httpsPort = 443) => renderCaddyConfig(routes, { httpsPort }) as unknown as Cfg;

describe("renderCaddyConfig", () => {
  it("keeps the admin API on the container's loopback", () => {
    expect(render([]).admin).toEqual({ listen: ADMIN_LISTEN });
    expect(ADMIN_LISTEN).toMatch(/^127\.0\.0\.1:/);
  });

  it("serves https routes on :443 and redirects their plain-HTTP requests", () => {
    const cfg = render([route("secure.example.com", true, "/", "app-1:3000")]);
    const { https, http } = cfg.apps.http.servers as Record<string, { listen: string[]; automatic_https?: unknown; routes: Route[] }>;
    expect(https!.listen).toEqual([":443"]);
    expect(https!.automatic_https).toEqual({ disable_redirects: true });
    expect(https!.routes[0]).toEqual({
      match: [{ host: ["secure.example.com"] }],
      handle: [{ handler: "reverse_proxy", upstreams: [{ dial: "app-1:3000" }], transport: { protocol: "http", dial_timeout: "5s" } }],
      terminal: true,
    });
    expect(http!.listen).toEqual([":80"]);
    expect(http!.routes[0]!.match).toEqual([{ host: ["secure.example.com"] }]);
    expect(http!.routes[0]!.handle[0]).toMatchObject({ handler: "static_response", status_code: 308, headers: { Location: ["https://{http.request.host}{http.request.uri}"] } });
  });

  it("names the published HTTPS port in the redirect when it is not 443", () => {
    const cfg = render([route("s.localhost", true)], 18543);
    const redirect = cfg.apps.http.servers.http!.routes[0]!.handle[0] as { headers: { Location: string[] } };
    expect(redirect.headers.Location).toEqual(["https://{http.request.host}:18543{http.request.uri}"]);
  });

  it("keeps http-only names off the HTTPS server (no certificates, no redirect)", () => {
    const cfg = render([route("plain.test", false, "/", "p:80")]);
    const { https, http } = cfg.apps.http.servers;
    expect(JSON.stringify(https)).not.toContain("plain.test");
    expect(http!.routes).toHaveLength(2);
    expect(http!.routes[0]!.handle[0]).toMatchObject({ handler: "reverse_proxy", upstreams: [{ dial: "p:80" }] });
  });

  it("ends both servers with a 404 catch-all", () => {
    for (const server of Object.values(render([route("a.test", false), route("b.test", true)]).apps.http.servers)) {
      const last = server.routes[server.routes.length - 1]!;
      expect(last.match).toBeUndefined();
      expect(last.handle[0]).toMatchObject({ handler: "static_response", status_code: 404 });
    }
  });

  it("orders longer path prefixes first and matches the prefix and below", () => {
    const cfg = render([route("a.test", false, "/", "root:80"), route("a.test", false, "/api", "api:80")]);
    const [first, second] = cfg.apps.http.servers.http!.routes;
    expect(first!.match).toEqual([{ host: ["a.test"], path: ["/api", "/api/*"] }]);
    expect(second!.match).toEqual([{ host: ["a.test"] }]);
  });

  it("makes every path of a host https when any of its routes is", () => {
    const cfg = render([route("mix.test", true, "/"), route("mix.test", false, "/api")]);
    const hosts = (name: string) => cfg.apps.http.servers[name]!.routes.filter((r) => r.handle[0]!.handler === "reverse_proxy").length;
    expect(hosts("https")).toBe(2);
    expect(hosts("http")).toBe(0);
  });

  it("renders the same text for the same routes in any order", () => {
    const a = [route("a.test", false), route("b.test", true, "/x"), route("b.test", true)];
    expect(canonicalJson(renderCaddyConfig(a, { httpsPort: 443 }))).toBe(canonicalJson(renderCaddyConfig([...a].reverse(), { httpsPort: 443 })));
  });
});

describe("canonicalJson", () => {
  it("sorts keys at every level and keeps array order", () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[2,{"y":2,"z":1}]},"b":1}');
  });
});

// proxy-label namespace (issue 17, docs/proxy-labels.md)
describe("renderCaddyConfig with directives", () => {
  const HASH = "$2a$14$" + "a".repeat(22) + "B".repeat(31);
  const none = { basic_auth: [], request_headers: {}, response_headers: {}, encode: [], redirect_to: null };
  const withDirectives = (r: ResolvedRoute, d: Partial<NonNullable<ResolvedRoute["directives"]>>): ResolvedRoute => ({ ...r, directives: { ...none, ...d } });

  it("puts headers, compression and basic auth in front of the upstream, in that order", () => {
    const cfg = render([
      withDirectives(route("a.test", false, "/", "a:80"), {
        basic_auth: [{ user: "alice", hash: HASH }],
        response_headers: { "X-Frame-Options": "DENY", Server: "" },
        request_headers: { "X-Tenant": "blue" },
        encode: ["zstd", "gzip"],
      }),
    ]);
    const handle = cfg.apps.http.servers.http!.routes[0]!.handle;
    expect(handle.map((h) => h.handler)).toEqual(["headers", "encode", "authentication", "reverse_proxy"]);
    expect(handle[0]).toEqual({
      handler: "headers",
      request: { set: { "X-Tenant": ["blue"] } },
      response: { set: { "X-Frame-Options": ["DENY"] }, delete: ["Server"], deferred: true },
    });
    expect(handle[1]).toEqual({ handler: "encode", encodings: { zstd: {}, gzip: {} }, prefer: ["zstd", "gzip"] });
    // Caddy 2.6 reads the hash base64-encoded (later releases read that form too).
    expect(handle[2]).toEqual({
      handler: "authentication",
      providers: { http_basic: { hash: { algorithm: "bcrypt" }, accounts: [{ username: "alice", password: Buffer.from(HASH).toString("base64") }] } },
    });
  });

  it("renders a route without directives exactly as before", () => {
    const plain = render([route("a.test", false, "/", "a:80")]);
    const empty = render([withDirectives(route("a.test", false, "/", "a:80"), {})]);
    expect(canonicalJson(empty)).toBe(canonicalJson(plain));
  });

  it("answers a redirected host with 308 to its twin (scheme and published port of the target)", () => {
    const cfg = renderCaddyConfig(
      [withDirectives(route("www.a.test", true), { redirect_to: "a.test", response_headers: { "X-R": "1" } }), route("a.test", true), withDirectives(route("www.b.test", false), { redirect_to: "b.test" }), route("b.test", false)],
      { httpsPort: 8443, httpPort: 8080 },
    ) as unknown as Cfg;
    const www = cfg.apps.http.servers.https!.routes.find((r) => r.match?.[0]?.host?.[0] === "www.a.test")!;
    expect(www.handle.map((h) => h.handler)).toEqual(["headers", "static_response"]);
    expect(www.handle[1]).toEqual({ handler: "static_response", status_code: 308, headers: { Location: ["https://a.test:8443{http.request.uri}"] } });
    const wwwB = cfg.apps.http.servers.http!.routes.find((r) => r.match?.[0]?.host?.[0] === "www.b.test")!;
    expect(wwwB.handle).toEqual([{ handler: "static_response", status_code: 308, headers: { Location: ["http://b.test:8080{http.request.uri}"] } }]);
  });

  it("carries no user text where Caddy would expand a placeholder except checked literals", () => {
    // The only placeholders in the whole config are the platform's own ({http.request.*}).
    const cfg = canonicalJson(
      render([withDirectives(route("a.test", false), { basic_auth: [{ user: "u", hash: HASH }], response_headers: { "X-A": "plain value" } })]),
    );
    expect(cfg.match(/\{[a-z][^}]*\}/g)?.filter((p) => !p.startsWith("{http.request."))).toBeUndefined();
  });
});
