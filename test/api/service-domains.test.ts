/**
 * Service applications' domains (issue 17, w7/svcroute; docs/decisions.md): PATCH
 * /service-applications/{uuid} {fqdn} validated as an application's fqdn; one host rule for
 * applications and service applications (a host one uses cannot be taken by the other, 409 with
 * the reason, naming only what the caller may see); the start labels every routed component
 * (routes, port, proxy network) and the database none; the proxy's ownership table lists the
 * service's hosts (still read through the server's hosts only), and a deleted service's hosts
 * leave the table its removal job carries. The real proxy serves them in test/e2e/services-routing.test.ts.
 */
import { LABEL_DOMAINS, LABEL_PROXY_PORT, LABEL_PROXY_ROUTES, ServiceActionPayload, ServiceDeployPayload } from "@capstan/shared";
import { beforeAll, describe, expect, it } from "vitest";
import { routeOwnership } from "../../control-plane/src/services/domain-ownership.js";
import type { TestInstance } from "./harness.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { lifecycleFile } from "./support/lifecycle.js";
import { answerNext, appWorld, createImageApp, ok, placement, type AppWorld } from "./support/applications.js";

let t: TestInstance;
const { keys, connectedWorld, prisma } = lifecycleFile((started) => (t = started));

const COMPOSE = `# documentation: https://example.org/docs
# slogan: Two routed components and a database.
# port: 8080

services:
  web:
    image: nginx:1.27
    environment:
      - SERVICE_URL_WEB_8080
  admin:
    image: nginx:1.27
    expose: ["9090"]
  cache:
    image: redis:7
`;

interface Svc {
  uuid: string;
  web: string;
  admin: string;
  cache: string;
}

async function createService(w: AppWorld, name: string, extra: Record<string, unknown> = {}, api = w.api): Promise<Svc> {
  const created = await ok(api.post("/services", { ...placement(w), docker_compose_raw: COMPOSE, name, ...extra }), "service");
  const d = await ok(api.get(`/services/${created.uuid}`), "detail");
  const byName = (list: { name: string; uuid: string }[], n: string) => list.find((c) => c.name === n)!.uuid;
  return { uuid: created.uuid, web: byName(d.applications, "web"), admin: byName(d.applications, "admin"), cache: byName(d.databases, "cache") };
}

/** The domain a component gets at creation (docs/services.md "Generated domains"): appWorld's server is at 10.0.0.5. */
const generatedFor = (svc: { uuid: string }, name: string) => `http://${name}-${svc.uuid.slice(0, 8)}.10.0.0.5.sslip.io`;

const fqdnOf = async (w: AppWorld, svc: string, name: string) =>
  ((await ok(w.api.get(`/services/${svc}`), "detail")).applications as { name: string; fqdn: string | null }[]).find((c) => c.name === name)!.fqdn;

describe("PATCH /service-applications/{uuid}", () => {
  let w: AppWorld;
  beforeAll(async () => {
    w = await appWorld(t, keys);
  });

  it("sets the domains as an application's fqdn (normalised), clears them with '' or null, and answers the component", async () => {
    const svc = await createService(w, "doms");
    const res = await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "Web.Example.org, http://plain.example.org/api/" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.message).toMatch(/next start or restart/);
    expect(res.body.data).toMatchObject({ uuid: svc.web, name: "web", service_uuid: svc.uuid, fqdn: "https://web.example.org,http://plain.example.org/api" });
    expect(await fqdnOf(w, svc.uuid, "web")).toBe("https://web.example.org,http://plain.example.org/api");
    const component = await prisma().serviceComponent.findUniqueOrThrow({ where: { uuid: svc.web }, include: { hosts: { orderBy: { host: "asc" } } } });
    expect(component.hosts.map((h) => h.host)).toEqual(["plain.example.org", "web.example.org"]);

    expect((await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "" })).body.data.fqdn).toBeNull();
    expect(await prisma().serviceComponentHost.count({ where: { component: { uuid: svc.web } } })).toBe(0);
    expect((await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "https://back.example.org" })).status).toBe(200);
    expect((await w.api.patch(`/service-applications/${svc.web}`, { fqdn: null })).body.data.fqdn).toBeNull();
  });

  it("refuses what an application's fqdn refuses (422 under fqdn), a missing or extra field, and a database's uuid (404)", async () => {
    const svc = await createService(w, "invalid");
    for (const fqdn of ["ftp://x.example.org", "https://", "not a host!", "https://a.example.org:99999", 42]) {
      const res = await w.api.patch(`/service-applications/${svc.web}`, { fqdn });
      expect(res.status, `${JSON.stringify(fqdn)}: ${JSON.stringify(res.body)}`).toBe(422);
      expect(Object.keys(res.body.errors ?? {}), JSON.stringify(res.body)).toContain("fqdn");
    }
    expect((await w.api.patch(`/service-applications/${svc.web}`, {})).status).toBe(422);
    expect((await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "a.example.org", name: "x" })).status).toBe(422);
    expect((await w.api.patch(`/service-applications/${svc.cache}`, { fqdn: "db.example.org" })).status).toBe(404);
    // Nothing changed: the web component keeps the domain generated at creation.
    expect(await fqdnOf(w, svc.uuid, "web")).toBe(generatedFor(svc, "web"));
  });
});

describe("one host rule for applications and service applications", () => {
  let w: AppWorld;
  let other: { uuid: string };
  let member: AppWorld["api"];
  beforeAll(async () => {
    w = await appWorld(t, keys);
    other = await ok(w.api.post("/projects", { name: "side" }), "project");
    const m = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: other.uuid, user_id: m.userId, permission_level: "full_access" }), "grant");
    member = t.api(m.token);
  });

  it("a host an application uses cannot be taken by another project's service application (409, the reason, nothing hidden named)", async () => {
    await createImageApp(w, { name: "shop-app", fqdn: "https://shop.example.com" });
    const svc = await createService(w, "member-svc", { project_uuid: other.uuid }, member);
    for (const [fqdn, reason] of [
      ["https://shop.example.com", /shop\.example\.com is already served by another resource on this server/],
      ["http://SHOP.example.com/admin", /shop\.example\.com is already used by a resource of another project/],
    ] as const) {
      const res = await member.patch(`/service-applications/${svc.web}`, { fqdn });
      expect(res.status, JSON.stringify(res.body)).toBe(409);
      expect(res.body.message).toMatch(reason);
      expect(res.body.message).not.toMatch(/shop-app/);
    }
    // The owner sees both projects: the message names the application and its project.
    const named = await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "https://shop.example.com/x" });
    expect(named.status).toBe(409);
    expect(named.body.message).toMatch(/application shop-app of project shop/);
    expect(await fqdnOf(w, svc.uuid, "web")).toBe(generatedFor(svc, "web"));
  });

  it("a host a service application uses cannot be taken by another project's application, on create or PATCH", async () => {
    const svc = await createService(w, "owner-svc");
    expect((await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "https://svc.example.com" })).status).toBe(200);
    const inOther = { ...placement(w), project_uuid: other.uuid, docker_registry_image_name: "nginx:1.27" };
    for (const fqdn of ["svc.example.com", "https://svc.example.com/api"]) {
      const res = await member.post("/applications/dockerimage", { ...inOther, fqdn });
      expect(res.status, `${fqdn}: ${JSON.stringify(res.body)}`).toBe(409);
      expect(res.body.message).not.toMatch(/owner-svc/);
    }
    const app = await ok(member.post("/applications/dockerimage", { ...inOther, name: "plain" }), "app");
    const patched = await w.api.patch(`/applications/${app.uuid}`, { fqdn: "https://svc.example.com/login" });
    expect(patched.status).toBe(409);
    expect(patched.body.message).toMatch(/service application web of service owner-svc of project shop/);
  });

  it("inside one project: other paths are fine, the exact host and path on the same server is one resource's (two components of one service too)", async () => {
    const svc = await createService(w, "paths");
    expect((await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "https://one.example.com" })).status).toBe(200);
    expect((await w.api.patch(`/service-applications/${svc.admin}`, { fqdn: "https://one.example.com/admin" })).status).toBe(200);
    const dup = await w.api.patch(`/service-applications/${svc.admin}`, { fqdn: "https://one.example.com" });
    expect(dup.status).toBe(409);
    expect(dup.body.message).toMatch(/one\.example\.com is already served by service application web of service paths on this server/);
    const app = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx:1.27", fqdn: "https://one.example.com/admin" });
    expect(app.status).toBe(409);
    expect(app.body.message).toMatch(/already served by service application admin of service paths/);
    // Its own domains again: no clash with itself.
    expect((await w.api.patch(`/service-applications/${svc.admin}`, { fqdn: "https://one.example.com/admin" })).status).toBe(200);
  });
});

describe("generated domains (docs/services.md)", () => {
  let w: AppWorld;
  beforeAll(async () => {
    w = await appWorld(t, keys);
  });

  it("each routable application gets <component>-<short id>.<server ip>.sslip.io over http at creation; the answer, the detail and the host rows agree; others get none", async () => {
    const res = await w.api.post("/services", { ...placement(w), docker_compose_raw: COMPOSE, name: "gen" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(["domains", "name", "type", "uuid"]);
    const web = generatedFor(res.body, "web");
    expect(web).toMatch(/^http:\/\/web-[0-9a-f]{8}\.10\.0\.0\.5\.sslip\.io$/);
    expect(res.body.domains).toEqual([web]);
    const d = await ok(w.api.get(`/services/${res.body.uuid}`), "detail");
    // admin is exposed but no SERVICE_FQDN_/SERVICE_URL_ names it: not routable, no domain; the database never has one.
    expect((d.applications as { name: string; fqdn: string | null }[]).map((c) => [c.name, c.fqdn])).toEqual([
      ["web", web],
      ["admin", null],
    ]);
    expect(d.databases[0]).not.toHaveProperty("fqdn");
    const hosts = await prisma().serviceComponentHost.findMany({ where: { component: { service: { uuid: res.body.uuid } } } });
    expect(hosts.map((h) => h.host)).toEqual([web.slice("http://".length)]);
  });

  it("are stored once: a compose PATCH keeps them (a cleared one stays cleared) and gives an added routable application its own", async () => {
    const svc = await createService(w, "kept");
    expect((await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "" })).status).toBe(200);
    const withApi = `${COMPOSE.replace("  cache:", "  api:\n    image: nginx:1.27\n    environment:\n      - SERVICE_URL_API_3000\n  cache:")}`;
    const res = await w.api.patch(`/services/${svc.uuid}`, { docker_compose_raw: withApi });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.message).not.toMatch(/generated domain/);
    expect(await fqdnOf(w, svc.uuid, "web")).toBeNull();
    expect(await fqdnOf(w, svc.uuid, "api")).toBe(generatedFor(svc, "api"));
    // Another PATCH changes nothing about either.
    expect((await w.api.patch(`/services/${svc.uuid}`, { docker_compose_raw: `${withApi}\n` })).status).toBe(200);
    expect([await fqdnOf(w, svc.uuid, "web"), await fqdnOf(w, svc.uuid, "api")]).toEqual([null, generatedFor(svc, "api")]);
  });

  it("never take a host another resource holds: the component stays without one and the answer says why", async () => {
    const svc = await createService(w, "clash");
    const other = await ok(w.api.post("/projects", { name: "elsewhere" }), "project");
    const taken = generatedFor(svc, "api");
    await createImageApp(w, { name: "squatter", project_uuid: other.uuid, fqdn: taken });
    const withApi = `${COMPOSE.replace("  cache:", "  api:\n    image: nginx:1.27\n    environment:\n      - SERVICE_URL_API_3000\n  cache:")}`;
    const res = await w.api.patch(`/services/${svc.uuid}`, { docker_compose_raw: withApi });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.message).toMatch(/api got no generated domain \(api-[0-9a-f]{8}\.10\.0\.0\.5\.sslip\.io is already served by application squatter on this server\); give it one with PATCH \/service-applications/);
    expect(await fqdnOf(w, svc.uuid, "api")).toBeNull();
    expect(await fqdnOf(w, svc.uuid, "web")).toBe(generatedFor(svc, "web"));
  });

  it("use a managed domain in wildcard or hybrid mode on the service's server (https), not a per_hostname one; a server added by a DNS name gets none", async () => {
    const dw = await appWorld(t, keys);
    await t.instance.admin.setTeamFeatures(dw.team.teamId, { enable: ["DNS_PROVIDER_MANAGEMENT", "DNS_MULTI_DOMAIN"] });
    const provider = await ok(dw.api.post("/dns-providers", { name: "pdns", type: "powerdns", credentials: { api_url: "https://pdns.example.org", api_key: "k" } }), "provider");
    const domain = (body: Record<string, unknown>) => ok(dw.api.post("/domains", { zone: "example.org", dns_provider_uuid: provider.data.uuid, ...body }), "domain");
    await domain({ name: "each.example.org", routing_mode: "per_hostname" });
    const perHost = await createService(dw, "per-host");
    expect(await fqdnOf(dw, perHost.uuid, "web")).toBe(generatedFor(perHost, "web"));

    await domain({ name: "apps.example.org", routing_mode: "wildcard", server_uuid: dw.server.uuid });
    const managed = await createService(dw, "managed");
    expect(await fqdnOf(dw, managed.uuid, "web")).toBe(`https://web-${managed.uuid.slice(0, 8)}.apps.example.org`);

    const named = await ok(dw.api.post("/servers", { name: "by-name", ip: "srv1.example.net", private_key_uuid: dw.keyUuid }), "server");
    const destination = (await ok(dw.api.get(`/servers/${named.uuid}`), "server")).destinations[0].uuid;
    const res = await dw.api.post("/services", { ...placement(dw), server_uuid: named.uuid, destination_uuid: destination, docker_compose_raw: COMPOSE, name: "named" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.domains).toEqual([]);
    expect(await fqdnOf(dw, res.body.uuid, "web")).toBeNull();
  });
});

describe("routing through the proxy", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await connectedWorld());
  });

  it("start labels every routed component with its routes and port, the database with none; the ownership table lists the service's hosts; delete takes them out", async () => {
    const app = await createImageApp(w, { name: "site", fqdn: "https://site.example.net" });
    const svc = await createService(w, "routed");
    expect((await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "https://web.example.net,http://web.example.net/plain" })).status).toBe(200);
    expect((await w.api.patch(`/service-applications/${svc.admin}`, { fqdn: "https://admin.example.net" })).status).toBe(200);

    const starting = w.api.post(`/services/${svc.uuid}/start`);
    const job = await answerNext(agent, "service.deploy", { result: { status: "running:healthy", components: [] } });
    expect((await starting).status).toBe(200);
    const payload = ServiceDeployPayload.parse(job.payload);
    const rendered = JSON.parse(payload.compose) as { services: Record<string, { labels: Record<string, string>; networks: Record<string, unknown> }> };
    const labels = (name: string) => rendered.services[`${svc.uuid}-${name}`]!.labels;
    expect(JSON.parse(labels("web")[LABEL_PROXY_ROUTES]!)).toEqual([
      { host: "web.example.net", https: true, path: "/" },
      { host: "web.example.net", https: false, path: "/plain" },
    ]);
    expect(labels("web")[LABEL_DOMAINS]).toBe("web.example.net");
    // The template's port for web (SERVICE_URL_WEB_8080), the first exposed port for admin.
    expect(labels("web")[LABEL_PROXY_PORT]).toBe("8080");
    expect(JSON.parse(labels("admin")[LABEL_PROXY_ROUTES]!)).toEqual([{ host: "admin.example.net", https: true, path: "/" }]);
    expect(labels("admin")[LABEL_PROXY_PORT]).toBe("9090");
    expect(labels("cache")[LABEL_PROXY_ROUTES]).toBe("");
    expect(labels("cache")[LABEL_DOMAINS]).toBe("");
    // SERVICE_URL_ values follow the domain.
    expect(JSON.stringify(rendered.services[`${svc.uuid}-web`])).toContain("https://web.example.net:8080");

    const projects = payload.proxy.ownership!.projects;
    expect(projects).toEqual([{ resources: [app.uuid, svc.uuid], hosts: ["admin.example.net", "site.example.net", "web.example.net"] }]);

    const removing = w.api.delete(`/services/${svc.uuid}`);
    const removal = await answerNext(agent, "service.action", { result: { status: "exited", components: [] } });
    expect((await removing).status).toBe(200);
    const removed = ServiceActionPayload.parse(removal.payload);
    expect(removed.proxy.ownership!.projects).toEqual([{ resources: [app.uuid], hosts: ["site.example.net"] }]);
    expect(await prisma().serviceComponentHost.count({ where: { host: { in: ["web.example.net", "admin.example.net"] } } })).toBe(0);
  });

  it("routeOwnership reads one statement whatever the team's other services, and skips excluded services", async () => {
    const svc = await createService(w, "counted");
    expect((await w.api.patch(`/service-applications/${svc.web}`, { fqdn: "https://counted.example.net" })).status).toBe(200);
    const db = prisma();
    const server = await db.server.findUniqueOrThrow({ where: { uuid: w.server.uuid } });
    const service = await db.service.findUniqueOrThrow({ where: { uuid: svc.uuid } });
    const table = await routeOwnership(db, server.id);
    expect(table!.projects.flatMap((p) => p.hosts)).toContain("counted.example.net");
    expect(table!.projects.flatMap((p) => p.resources)).toContain(svc.uuid);
    const without = await routeOwnership(db, server.id, { excludingServices: [service.id] });
    expect(without!.projects.flatMap((p) => p.hosts)).not.toContain("counted.example.net");
    expect(without!.projects.flatMap((p) => p.resources)).not.toContain(svc.uuid);
    if (t.instance.database.kind === "sqlite") {
      // Both halves through the host indexes and primary keys: nothing scanned, nothing by the team's index.
      let raw: unknown[] = [];
      const spy = new Proxy(db, { get: (target, prop, recv) => (prop === "$queryRaw" ? (...args: unknown[]) => ((raw = args), (target.$queryRaw as (...a: unknown[]) => unknown)(...args)) : Reflect.get(target, prop, recv)) });
      await routeOwnership(spy, server.id);
      const [strings, ...values] = raw as [readonly string[], ...unknown[]];
      const plan = (await db.$queryRawUnsafe<{ detail: string }[]>(`EXPLAIN QUERY PLAN ${strings.join("?")}`, ...values)).map((p) => p.detail);
      expect(plan).toContain("SEARCH h USING INDEX ApplicationHost_host_idx (host=?)");
      expect(plan).toContain("SEARCH h USING INDEX ServiceComponentHost_host_idx (host=?)");
      expect(plan.filter((d) => /^SCAN |teamId/.test(d)), plan.join("\n")).toEqual([]);
    }
  });
});
