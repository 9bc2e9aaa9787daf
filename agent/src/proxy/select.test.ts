import { describe, expect, it } from "vitest";
import { type Candidate, isSafeUpstreamName, normalisePrefix, selectRoutes } from "./select.js";

function app(name: string, over: Partial<Candidate> & { resource?: string; rollout?: number; routes?: unknown; port?: string; network?: string } = {}): Candidate {
  const labels: Record<string, string> = {
    "capstan.managed": "true",
    "capstan.resource.uuid": over.resource ?? "res-a",
    "capstan.rollout": String(over.rollout ?? 1),
    "capstan.proxy.port": over.port ?? "8080",
    "capstan.proxy.network": over.network ?? "capstan",
    "capstan.proxy.routes": typeof over.routes === "string" ? over.routes : JSON.stringify(over.routes ?? [{ host: "a.example.com", https: true, path: "/" }]),
  };
  return { name, running: over.running ?? true, health: over.health === undefined ? null : over.health, labels: { ...labels, ...over.labels } };
}

describe("selectRoutes", () => {
  it("routes the newest serving container of each resource", () => {
    const { routes, warnings } = selectRoutes(
      [app("a-old", { rollout: 100 }), app("a-new", { rollout: 200 }), app("b-1", { resource: "res-b", routes: [{ host: "b.test", https: false, path: "/" }], port: "3000" })],
      ["capstan"],
    );
    expect(warnings).toEqual([]);
    expect(routes).toEqual([
      { host: "a.example.com", path: "/", https: true, dial: "a-new.capstan:8080", resource: "res-a", container: "a-new" },
      { host: "b.test", path: "/", https: false, dial: "b-1.capstan:3000", resource: "res-b", container: "b-1" },
    ]);
  });

  it("routes each component of a service from its own container (w6/svcproxy), under the service's uuid", () => {
    const component = (name: string, uuid: string, host: string | null) =>
      app(name, { resource: "svc-1", routes: host ? [{ host, https: true, path: "/" }] : [], labels: { "capstan.service.component": uuid } });
    const { routes, warnings } = selectRoutes([component("svc-1-web", "c-web", "web.test"), component("svc-1-admin", "c-admin", "admin.test"), component("svc-1-db", "c-db", null)], ["capstan"]);
    expect(warnings).toEqual([]);
    expect(routes.map((r) => [r.host, r.container, r.resource])).toEqual([
      ["admin.test", "svc-1-admin", "svc-1"],
      ["web.test", "svc-1-web", "svc-1"],
    ]);
    // Without the component label, one container of the resource wins (compose applications: the public service).
    const plain = selectRoutes([app("x-web", { resource: "svc-2", routes: [{ host: "w.test", https: true, path: "/" }] }), app("x-admin", { resource: "svc-2", routes: [{ host: "a.test", https: true, path: "/" }] })], ["capstan"]);
    expect(plain.routes.map((r) => r.container)).toEqual(["x-web"]);
  });

  it("keeps traffic on the old container while the newer one is starting, unhealthy or stopped", () => {
    for (const newer of [
      app("a-new", { rollout: 200, health: "starting" }),
      app("a-new", { rollout: 200, health: "unhealthy" }),
      app("a-new", { rollout: 200, running: false }),
    ]) {
      const { routes } = selectRoutes([app("a-old", { rollout: 100, health: "healthy" }), newer], ["capstan"]);
      expect(routes.map((r) => r.container)).toEqual(["a-old"]);
    }
  });

  it("switches to the newer container once it is healthy", () => {
    const { routes } = selectRoutes([app("a-old", { rollout: 100, health: "healthy" }), app("a-new", { rollout: 200, health: "healthy" })], ["capstan"]);
    expect(routes.map((r) => r.container)).toEqual(["a-new"]);
  });

  it("gives a resource no routes when the winner has none (fqdn removed), without falling back", () => {
    const { routes } = selectRoutes([app("a-old", { rollout: 100 }), app("a-new", { rollout: 200, routes: [] })], ["capstan"]);
    expect(routes).toEqual([]);
  });

  it("routes the public service of a compose deployment, whatever its siblings are named", () => {
    const web = app("u-app", { rollout: 300 });
    const db = app("u-db", { rollout: 300, routes: "" });
    const { routes } = selectRoutes([web, db], ["capstan"]);
    expect(routes.map((r) => r.container)).toEqual(["u-app"]);
    expect(selectRoutes([db, web], ["capstan"]).routes.map((r) => r.container)).toEqual(["u-app"]);
  });

  it("ignores containers without a resource uuid (the proxy itself, agents)", () => {
    const proxy: Candidate = { name: "capstan-proxy", running: true, health: null, labels: { "capstan.managed": "true", "capstan.component": "proxy" } };
    expect(selectRoutes([proxy], ["capstan"]).routes).toEqual([]);
  });

  it("skips bad labels with a warning instead of failing", () => {
    const { routes, warnings } = selectRoutes(
      [
        app("bad-json", { resource: "r1", routes: "[{" }),
        app("bad-host", { resource: "r2", routes: [{ host: "a b", https: false, path: "/" }] }),
        app("bad-port", { resource: "r3", port: "99999" }),
        app("other-net", { resource: "r4", network: "elsewhere" }),
        app("localhost", { resource: "r5" }),
        app("10.0.0.1", { resource: "r6" }),
      ],
      ["capstan"],
    );
    expect(routes).toEqual([]);
    expect(warnings).toHaveLength(6);
    expect(warnings.join("\n")).toMatch(/bad-json.*route list/);
    expect(warnings.join("\n")).toMatch(/bad-port.*not a port/);
    expect(warnings.join("\n")).toMatch(/other-net.*network elsewhere/);
    expect(warnings.join("\n")).toMatch(/localhost: its name cannot be used/);
  });

  it("gives a host+path claimed twice to one resource, deterministically, and says so", () => {
    const same = [{ host: "dup.test", https: false, path: "/" }];
    const a = selectRoutes([app("x", { resource: "res-2", routes: same }), app("y", { resource: "res-1", routes: same })], ["capstan"]);
    const b = selectRoutes([app("y", { resource: "res-1", routes: same }), app("x", { resource: "res-2", routes: same })], ["capstan"]);
    expect(a.routes).toEqual(b.routes);
    expect(a.routes.map((r) => r.resource)).toEqual(["res-1"]);
    expect(a.warnings[0]).toMatch(/dup\.test is claimed by res-1 and res-2/);
  });

  it("normalises path prefixes", () => {
    const { routes } = selectRoutes([app("p", { routes: [{ host: "p.test", https: false, path: "/api/" }, { host: "p.test", https: false, path: "/x?y=1" }] })], ["capstan"]);
    expect(routes.map((r) => r.path)).toEqual(["/api", "/x"]);
    expect(normalisePrefix("/")).toBe("/");
    expect(normalisePrefix("//")).toBe("/");
  });
});

describe("isSafeUpstreamName", () => {
  it("accepts container names and refuses loopback or address-like ones", () => {
    expect(isSafeUpstreamName("app-1234_web.1")).toBe(true);
    for (const bad of ["localhost", "LOCALHOST", "localhost.localdomain", "127.0.0.1", "10.1.2.3", "-x", "a:2019", "a/b", ""]) {
      expect(isSafeUpstreamName(bad), bad).toBe(false);
    }
  });
});

describe("selectRoutes: the routing network (capstan.proxy.network)", () => {
  it("dials the container on its labelled network, even when the proxy shares several with it", () => {
    const c = { ...app("web-1", { network: "capstan-proxy-net" }), networks: ["capstan-env-1", "capstan-proxy-net"] };
    const { routes, warnings } = selectRoutes([c], ["capstan-env-1", "capstan-proxy-net"]);
    expect(warnings).toEqual([]);
    expect(routes.map((r) => r.dial)).toEqual(["web-1.capstan-proxy-net:8080"]);
  });

  it("skips, with the reason, a container whose labelled network the proxy does not join", () => {
    const c = { ...app("internal-1", { network: "capstan-env-2" }), networks: ["capstan-env-2"] };
    const { routes, warnings } = selectRoutes([c], ["capstan-proxy-net"]);
    expect(routes).toEqual([]);
    expect(warnings).toEqual([expect.stringMatching(/internal-1: network capstan-env-2 is not one the proxy joins; not routed/)]);
  });

  it("routes on a network both share when the labelled one is no longer the proxy's (settings changed since the deploy)", () => {
    const c = { ...app("web-3", { network: "capstan-proxy-net" }), networks: ["capstan-env-1", "capstan-proxy-net"] };
    const { routes, warnings } = selectRoutes([c], ["capstan", "capstan-env-1"]);
    expect(routes.map((r) => r.dial)).toEqual(["web-3.capstan-env-1:8080"]);
    expect(warnings).toEqual([expect.stringMatching(/web-3: network capstan-proxy-net is not one the proxy joins; routed on capstan-env-1 until it is redeployed/)]);
  });

  it("skips, with the reason, a container not attached to its labelled network (a hand-set label)", () => {
    const c = { ...app("web-2", { network: "capstan-proxy-net" }), networks: ["capstan-env-1"] };
    const { routes, warnings } = selectRoutes([c], ["capstan-env-1", "capstan-proxy-net"]);
    expect(routes).toEqual([]);
    expect(warnings).toEqual([expect.stringMatching(/web-2: it is not attached to network capstan-proxy-net/)]);
  });

  it("dials by container name when the label is empty, or the network name cannot be a DNS label", () => {
    const bare = app("old-1", { resource: "r1", network: "" });
    const upper = { ...app("up-1", { resource: "r2", network: "Proxy_Net", routes: [{ host: "u.test", https: false, path: "/" }] }), networks: ["Proxy_Net"] };
    const { routes } = selectRoutes([bare, upper], ["capstan", "Proxy_Net"]);
    expect(routes.map((r) => r.dial)).toEqual(["old-1:8080", "up-1:8080"]);
  });
});

describe("selectRoutes: host ownership from the control plane", () => {
  const site = (name: string, resource: string, path = "/", host = "a1.example.com") => app(name, { resource, routes: [{ host, https: true, path }] });
  // res-a (project 1) owns a1.example.com; res-b is another project's resource on the server.
  const table = (generation = 1) => ({ generation, projects: [{ resources: ["res-a"], hosts: ["a1.example.com"] }, { resources: ["res-b"], hosts: ["b.example.com"] }] });

  it("without a table, longest-prefix routing would hand /login of another resource's host to whoever labels it", () => {
    const { routes } = selectRoutes([site("a", "res-a"), site("b", "res-b", "/login")], ["capstan"]);
    expect(routes.map((r) => `${r.resource} ${r.host}${r.path}`)).toEqual(["res-a a1.example.com/", "res-b a1.example.com/login"]);
  });

  it("never lets a resource serve a path under a host owned by another project's resource", () => {
    const { routes, warnings } = selectRoutes([site("a", "res-a"), site("b", "res-b", "/login")], ["capstan"], table());
    expect(routes.map((r) => `${r.resource} ${r.host}${r.path}`)).toEqual(["res-a a1.example.com/"]);
    expect(warnings).toEqual([expect.stringMatching(/container b: a1\.example\.com\/login is not routed: the control plane gives a1\.example\.com to another resource's project/)]);
  });

  it("keeps the owner on its host even when the other resource's stale label would win the tie (smaller uuid)", () => {
    // "res-0" sorts first and would keep a1.example.com/ under the label-only rule.
    const { routes } = selectRoutes([site("stale", "res-0"), site("a", "res-a")], ["capstan"], table());
    expect(routes.map((r) => r.resource)).toEqual(["res-a"]);
  });

  it("refuses hosts a wildcard of another project covers, and wildcards covering another project's host", () => {
    const wild = { generation: 1, projects: [{ resources: ["res-a"], hosts: ["*.example.com"] }] };
    const sub = selectRoutes([site("b", "res-b", "/", "shop.example.com")], ["capstan"], wild);
    expect(sub.routes).toEqual([]);
    const cover = selectRoutes([site("b", "res-b", "/", "*.example.com")], ["capstan"], table());
    expect(cover.routes).toEqual([]);
    // a deeper name is not covered by *.example.com (one label, as Caddy matches)
    expect(selectRoutes([site("b", "res-b", "/", "x.y.example.com")], ["capstan"], wild).routes).toHaveLength(1);
  });

  it("lets resources of the owning project share a host by path, and routes hosts nobody owns by their labels", () => {
    const shared = { generation: 1, projects: [{ resources: ["res-a", "res-c"], hosts: ["a1.example.com"] }] };
    const { routes, warnings } = selectRoutes([site("a", "res-a"), site("c", "res-c", "/api"), site("d", "res-d", "/", "free.example.com")], ["capstan"], shared);
    expect(warnings).toEqual([]);
    expect(routes.map((r) => `${r.resource} ${r.host}${r.path}`)).toEqual(["res-a a1.example.com/", "res-c a1.example.com/api", "res-d free.example.com/"]);
  });

  it("a resource the table does not know (a leftover container) serves no listed host", () => {
    const { routes } = selectRoutes([site("old", "res-gone")], ["capstan"], table());
    expect(routes).toEqual([]);
  });
});

describe("ownershipFor: the newest table wins", () => {
  it("keeps the table of the highest generation, and the last one for syncs that bring none", async () => {
    const { ownershipFor } = await import("./index.js");
    const key = `test-${Math.random()}`;
    const newer = { generation: 20, projects: [] };
    const older = { generation: 10, projects: [{ resources: ["x"], hosts: ["x.test"] }] };
    expect(ownershipFor(key, undefined)).toBeUndefined();
    expect(ownershipFor(key, newer)).toBe(newer);
    expect(ownershipFor(key, older)).toBe(newer);
    expect(ownershipFor(key, undefined)).toBe(newer);
    const newest = { generation: 30, projects: [] };
    expect(ownershipFor(key, newest)).toBe(newest);
  });
});

// proxy-label namespace (issue 17, docs/proxy-labels.md)
describe("selectRoutes with proxy.* labels", () => {
  const HASH = "$2a$14$" + "a".repeat(22) + "B".repeat(31);
  const twin = [
    { host: "example.test", https: false, path: "/" },
    { host: "www.example.test", https: false, path: "/" },
  ];

  it("gives every route of the container its directives", () => {
    const { routes, warnings } = selectRoutes([app("a-1", { labels: { "proxy.basic_auth.alice": HASH, "proxy.headers.response.X-Frame-Options": "DENY", "proxy.encode": "gzip" } })], ["capstan"]);
    expect(warnings).toEqual([]);
    expect(routes[0]!.directives).toEqual({
      basic_auth: [{ user: "alice", hash: HASH }],
      request_headers: {},
      response_headers: { "X-Frame-Options": "DENY" },
      encode: ["gzip"],
      redirect_to: null,
    });
  });

  it("serves the route without a bad label and says why", () => {
    const { routes, warnings } = selectRoutes([app("a-1", { labels: { "proxy.basic_auth.alice": "plain-password", "proxy.headers.response.X-Ok": "yes" } })], ["capstan"]);
    expect(routes).toHaveLength(1);
    expect(routes[0]!.directives?.basic_auth).toEqual([]);
    expect(routes[0]!.directives?.response_headers).toEqual({ "X-Ok": "yes" });
    expect(warnings).toEqual([expect.stringMatching(/^container a-1: label proxy\.basic_auth\.alice: not a bcrypt hash/)]);
    expect(warnings[0]).not.toContain("plain-password");
  });

  it("redirects www to the apex (and back) only between the resource's own hosts", () => {
    const apex = selectRoutes([app("a-1", { routes: twin, labels: { "proxy.redirect": "to-apex" } })], ["capstan"]).routes;
    expect(apex.map((r) => [r.host, r.directives?.redirect_to])).toEqual([
      ["example.test", null],
      ["www.example.test", "example.test"],
    ]);
    const www = selectRoutes([app("a-1", { routes: twin, labels: { "proxy.redirect": "to-www" } })], ["capstan"]).routes;
    expect(www.map((r) => [r.host, r.directives?.redirect_to])).toEqual([
      ["example.test", "www.example.test"],
      ["www.example.test", null],
    ]);
  });

  it("does not redirect to a host the resource is not routed for", () => {
    // www.victim.test's apex belongs to someone else: the label cannot send its visitors anywhere.
    const { routes, warnings } = selectRoutes(
      [
        app("a-1", { routes: [{ host: "www.victim.test", https: false, path: "/" }], labels: { "proxy.redirect": "to-apex" } }),
        app("b-1", { resource: "res-b", routes: [{ host: "victim.test", https: false, path: "/" }] }),
      ],
      ["capstan"],
    );
    expect(routes.find((r) => r.host === "www.victim.test")!.directives?.redirect_to).toBeNull();
    expect(warnings).toEqual([expect.stringMatching(/container a-1: label proxy\.redirect=to-apex: needs both a host and its www\. twin/)]);
  });

  it("leaves host ownership to the control plane's table: directives add no host", () => {
    const ownership = { generation: 1, projects: [{ resources: ["res-a"], hosts: [] }, { resources: ["res-b"], hosts: ["taken.test", "www.taken.test"] }] };
    const { routes } = selectRoutes(
      [app("a-1", { routes: [{ host: "taken.test", https: false, path: "/" }], labels: { "proxy.redirect": "to-www", "proxy.headers.request.X-Forwarded-Host": "taken.test" } })],
      ["capstan"],
      ownership,
    );
    expect(routes).toEqual([]);
  });

  it("takes the user's routing network (proxy.network) over the automatic one", () => {
    const c = { ...app("a-1", { labels: { "proxy.network": "user-net" } }), networks: ["capstan", "user-net"] };
    expect(selectRoutes([c], ["capstan", "user-net"]).routes[0]!.dial).toBe("a-1.user-net:8080");
    // A network the container is not attached to is refused as before.
    const off = { ...app("a-1", { labels: { "proxy.network": "user-net" } }), networks: ["capstan"] };
    const r = selectRoutes([off], ["capstan", "user-net"]);
    expect(r.routes).toEqual([]);
    expect(r.warnings).toEqual([expect.stringContaining("(its proxy.network label); not routed")]);
  });
});
