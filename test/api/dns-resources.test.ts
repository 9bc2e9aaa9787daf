import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { dig, startPowerDns, type PowerDnsServer } from "../support/dns-servers.js";

/**
 * Resource hostnames (GET /dns/resource/{type}/{uuid}, resync, assign-domain) and environment
 * bindings (issue 21, w6) on a real control plane against a real PowerDNS started by
 * test/services/powerdns.sh; answers checked with kdig.
 */
let t: TestInstance;
let pdns: PowerDnsServer;
let team: TeamFixture;
let serverUuid: string;
let destination: string;
let providerUuid: string;
let projectUuid: string;
const keys = new KeyFactory();
const SERVER_IP = "203.0.113.7";
const ZONE = "res.test";

const settled = async (uuids: string[]) => {
  for (const uuid of uuids) await expect.poll(async () => (await team.api.get(`/domains/${uuid}`)).body.reconcile.state, { timeout: 60_000, interval: 50 }).toBe("idle");
};
/** Settled across domains that dispatch each other (a hostname handed over): idle twice in a row. */
const allSettled = async (uuids: string[]) => {
  await settled(uuids);
  await settled(uuids);
};
const owner = async (name: string) => (await dig(pdns.dnsPort, `_capstan.${name}`, "TXT")).map((s) => s.replace(/"/g, ""));

const app = async (env: string, name: string, fqdn: string) => {
  const r = await team.api.post("/applications/dockerimage", {
    project_uuid: projectUuid,
    environment_name: env,
    server_uuid: serverUuid,
    destination_uuid: destination,
    name,
    docker_registry_image_name: "nginx:1.27",
    fqdn,
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.uuid as string;
};

let outer: string; // b.res.test: per_hostname
let inner: string; // svc.b.res.test: per_hostname (more specific)

beforeAll(async () => {
  pdns = await startPowerDns();
  await pdns.addZone(ZONE);
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["DNS_PROVIDER_MANAGEMENT"] });
  const key = (await team.api.post("/security/keys", { name: "k", private_key: (await keys.generate("ed25519")).privateKey })).body;
  serverUuid = (await team.api.post("/servers", { name: "web", ip: SERVER_IP, private_key_uuid: key.uuid })).body.uuid;
  destination = (await team.api.get(`/servers/${serverUuid}`)).body.destinations[0].uuid;
  projectUuid = (await team.api.post("/projects", { name: "dnsres" })).body.uuid;
  expect((await team.api.post(`/projects/${projectUuid}/environments`, { name: "preview" })).status).toBe(201);
  providerUuid = (await team.api.post("/dns-providers", { name: "pdns", type: "powerdns", credentials: { api_url: pdns.apiUrl, api_key: pdns.apiKey } })).body.data.uuid;
  outer = (await team.api.post("/domains", { name: `b.${ZONE}`, zone: ZONE, dns_provider_uuid: providerUuid, routing_mode: "per_hostname" })).body.data.uuid;
  inner = (await team.api.post("/domains", { name: `svc.b.${ZONE}`, zone: ZONE, dns_provider_uuid: providerUuid, routing_mode: "per_hostname" })).body.data.uuid;
}, 300_000);

afterAll(async () => {
  await t?.close();
  await pdns?.stop();
});

describe("resource hostnames", () => {
  it("each hostname's domain, binding reason, record and state: pending, then synced (resolves); drifted for a hand-made record; unmanaged outside every domain", async () => {
    await pdns.replaceRRset(ZONE, `hand.svc.b.${ZONE}`, "A", ["198.51.100.9"], 3600);
    const uuid = await app("production", "web", `https://web.svc.b.${ZONE},https://hand.svc.b.${ZONE},https://elsewhere.example`);
    const first = await team.api.get(`/dns/resource/application/${uuid}`);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.resource_type).toBe("application");
    expect(first.body.hostnames.map((h: { hostname: string }) => h.hostname)).toEqual([`web.svc.b.${ZONE}`, `hand.svc.b.${ZONE}`, "elsewhere.example"]);
    expect(first.body.hostnames[0]).toMatchObject({ domain_uuid: inner, binding: "suffix_match", state: expect.stringMatching(/^(pending|synced)$/) });

    await allSettled([outer, inner]);
    const r = (await team.api.get(`/dns/resource/application/${uuid}`)).body;
    expect(r.hostnames).toEqual([
      { hostname: `web.svc.b.${ZONE}`, component: null, state: "synced", domain_uuid: inner, domain_name: `svc.b.${ZONE}`, binding: "suffix_match", record: { name: `web.svc.b.${ZONE}`, type: "A", content: SERVER_IP }, error: null },
      expect.objectContaining({ hostname: `hand.svc.b.${ZONE}`, state: "drifted", domain_uuid: inner, error: expect.stringContaining("did not create") }),
      { hostname: "elsewhere.example", component: null, state: "unmanaged", domain_uuid: null, domain_name: null, binding: null, record: null, error: null },
    ]);
    expect(await dig(pdns.dnsPort, `web.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);
    expect(await owner(`web.svc.b.${ZONE}`)).toEqual([`capstan-owner=${inner}`]);
    expect(await dig(pdns.dnsPort, `hand.svc.b.${ZONE}`, "A")).toEqual(["198.51.100.9"]);
  });

  it("resync dispatches the covering domains' reconciles (202); dry_run answers the plan limited to the resource's names and dispatches nothing", async () => {
    const uuid = await app("production", "dry", `https://dry.svc.b.${ZONE}`);
    await allSettled([outer, inner]);
    // Removed by hand behind Capstan's back: the plan puts it back.
    await pdns.replaceRRset(ZONE, `dry.svc.b.${ZONE}`, "A", [], 300);
    const before = (await team.api.get(`/domains/${inner}`)).body.reconcile.requested_at;
    const plan = await team.api.post(`/dns/resource/application/${uuid}/resync?dry_run=true`);
    expect(plan.status, JSON.stringify(plan.body)).toBe(200);
    expect(plan.body.dry_run).toBe(true);
    const innerPlan = plan.body.plans.find((p: { domain_uuid: string }) => p.domain_uuid === inner);
    expect(innerPlan).toEqual({ domain_uuid: inner, domain_name: `svc.b.${ZONE}`, creates: [{ name: `dry.svc.b.${ZONE}`, type: "A", content: SERVER_IP }], updates: [], deletes: [], drift: [], error: null });
    // Other resources' names are not in it (hand.svc.b is another application's drift).
    expect(JSON.stringify(plan.body)).not.toContain("hand.svc");
    expect((await team.api.get(`/domains/${inner}`)).body.reconcile.requested_at).toBe(before);
    expect(await dig(pdns.dnsPort, `dry.svc.b.${ZONE}`, "A")).toEqual([]);

    const go = await team.api.post(`/dns/resource/application/${uuid}/resync`);
    expect(go.status, JSON.stringify(go.body)).toBe(202);
    expect(go.body.domains.map((d: { uuid: string }) => d.uuid).sort()).toEqual([outer, inner].sort());
    await allSettled([outer, inner]);
    expect(await dig(pdns.dnsPort, `dry.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);
    expect((await team.api.get(`/dns/resource/application/${uuid}`)).body.hostnames[0].state).toBe("synced");
  });

  it("assign-domain needs DNS_MULTI_DOMAIN; pins a hostname to a covering domain (override), the record moves; null unpins and it moves back", async () => {
    const uuid = await app("production", "pin", `https://pin.svc.b.${ZONE}`);
    await allSettled([outer, inner]);
    expect(await owner(`pin.svc.b.${ZONE}`)).toEqual([`capstan-owner=${inner}`]);
    const gated = await team.api.post(`/dns/resource/application/${uuid}/assign-domain`, { hostname: `pin.svc.b.${ZONE}`, domain_uuid: outer });
    expect(gated.status).toBe(402);
    expect(gated.body.message).toContain("DNS_MULTI_DOMAIN");
    await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["DNS_MULTI_DOMAIN"] });

    const pinned = await team.api.post(`/dns/resource/application/${uuid}/assign-domain`, { hostname: `pin.svc.b.${ZONE}`, domain_uuid: outer });
    expect(pinned.status, JSON.stringify(pinned.body)).toBe(200);
    expect(pinned.body.hostnames[0]).toMatchObject({ hostname: `pin.svc.b.${ZONE}`, domain_uuid: outer, binding: "override" });
    await allSettled([outer, inner]);
    expect(await owner(`pin.svc.b.${ZONE}`)).toEqual([`capstan-owner=${outer}`]);
    expect(await dig(pdns.dnsPort, `pin.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);
    expect((await team.api.get(`/dns/resource/application/${uuid}`)).body.hostnames[0]).toMatchObject({ state: "synced", domain_uuid: outer, binding: "override" });

    // Bad input: 422 naming the field, nothing changed.
    for (const [body, field] of [
      [{ hostname: "other.example", domain_uuid: outer }, "hostname"],
      [{ hostname: `pin.svc.b.${ZONE}`, domain_uuid: inner, extra: 1 }, "extra"],
    ] as const) {
      const r = await team.api.post(`/dns/resource/application/${uuid}/assign-domain`, body);
      expect(r.status, JSON.stringify(r.body)).toBe(422);
      expect(Object.keys(r.body.errors ?? {}), JSON.stringify(r.body)).toContain(field);
    }
    const other = await app("production", "other", `https://x.other.${ZONE}`);
    const notCovering = await team.api.post(`/dns/resource/application/${other}/assign-domain`, { hostname: `x.other.${ZONE}`, domain_uuid: outer });
    expect(notCovering.status).toBe(422);
    expect(Object.keys(notCovering.body.errors)).toEqual(["domain_uuid"]);
    expect((await team.api.post(`/dns/resource/application/${uuid}/assign-domain`, { hostname: `pin.svc.b.${ZONE}`, domain_uuid: "00000000-0000-4000-8000-000000000000" })).status).toBe(404);

    const unpinned = await team.api.post(`/dns/resource/application/${uuid}/assign-domain`, { hostname: `pin.svc.b.${ZONE}`, domain_uuid: null });
    expect(unpinned.body.hostnames[0]).toMatchObject({ domain_uuid: inner, binding: "suffix_match" });
    await allSettled([outer, inner]);
    expect(await owner(`pin.svc.b.${ZONE}`)).toEqual([`capstan-owner=${inner}`]);
    expect(await dig(pdns.dnsPort, `pin.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);
  });

  it("in wildcard mode the hostname is served by the domain's wildcard record", async () => {
    const w = (await team.api.post("/domains", { name: `w.${ZONE}`, zone: ZONE, dns_provider_uuid: providerUuid, routing_mode: "wildcard", server_uuid: serverUuid })).body.data.uuid as string;
    const uuid = await app("production", "wild", `https://wild.w.${ZONE}`);
    expect((await team.api.get(`/dns/resource/application/${uuid}`)).body.hostnames[0]).toMatchObject({ domain_uuid: w, binding: "suffix_match", record: { name: `*.w.${ZONE}`, type: "A", content: SERVER_IP }, state: "pending" });
    expect((await team.api.post(`/domains/${w}/sync`)).status).toBe(202);
    await settled([w]);
    expect((await team.api.get(`/dns/resource/application/${uuid}`)).body.hostnames[0]).toMatchObject({ domain_uuid: w, state: "synced" });
    expect(await dig(pdns.dnsPort, `wild.w.${ZONE}`, "A")).toEqual([SERVER_IP]);
    expect((await team.api.delete(`/domains/${w}`)).status).toBe(200);
    expect((await team.api.get(`/dns/resource/application/${uuid}`)).body.hostnames[0]).toMatchObject({ state: "unmanaged", domain_uuid: null });
  });

  it("another team's resource is 404; an unknown type is 422", async () => {
    const uuid = await app("production", "mine", `https://mine.svc.b.${ZONE}`);
    const stranger = await t.newTeam();
    await t.instance.admin.setTeamFeatures(stranger.teamId, { enable: ["DNS_PROVIDER_MANAGEMENT", "DNS_MULTI_DOMAIN"] });
    expect((await stranger.api.get(`/dns/resource/application/${uuid}`)).status).toBe(404);
    expect((await stranger.api.post(`/dns/resource/application/${uuid}/resync`)).status).toBe(404);
    expect((await stranger.api.post(`/dns/resource/application/${uuid}/assign-domain`, { hostname: `mine.svc.b.${ZONE}`, domain_uuid: null })).status).toBe(404);
    expect((await team.api.get(`/dns/resource/database/${uuid}`)).status).toBe(422);
  });
});

describe("environment bindings", () => {
  it("402 without DNS_ENV_BINDINGS; a preview role binding sends preview apps to the second domain; priorities; delete sends them back", async () => {
    const gated = await team.api.get(`/domains/${outer}/environment-bindings`);
    expect(gated.status).toBe(402);
    expect(gated.body.message).toContain("DNS_ENV_BINDINGS");
    await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["DNS_ENV_BINDINGS"] });

    const prod = await app("production", "shop", `https://shop.svc.b.${ZONE}`);
    const preview = await app("preview", "shop-pr", `https://shop-pr.svc.b.${ZONE}`);
    await allSettled([outer, inner]);
    expect(await owner(`shop-pr.svc.b.${ZONE}`)).toEqual([`capstan-owner=${inner}`]);

    const bad = await team.api.post(`/domains/${outer}/environment-bindings`, { environment_role: "preview", environment_id: 1 });
    expect(bad.status).toBe(422);
    expect((await team.api.post(`/domains/${outer}/environment-bindings`, { priority: 1 })).status).toBe(422);
    expect((await team.api.post(`/domains/${outer}/environment-bindings`, { environment_id: 999_999 })).status).toBe(404);

    const b = await team.api.post(`/domains/${outer}/environment-bindings`, { environment_role: "preview", priority: 5 });
    expect(b.status, JSON.stringify(b.body)).toBe(201);
    expect(b.body.data).toMatchObject({ domain_uuid: outer, environment_id: null, environment_role: "preview", priority: 5 });
    expect((await team.api.get(`/domains/${outer}/environment-bindings`)).body.data).toEqual([b.body.data]);
    await allSettled([outer, inner]);
    expect((await team.api.get(`/dns/resource/application/${preview}`)).body.hostnames[0]).toMatchObject({ domain_uuid: outer, binding: "environment_binding", state: "synced" });
    expect(await owner(`shop-pr.svc.b.${ZONE}`)).toEqual([`capstan-owner=${outer}`]);
    expect(await dig(pdns.dnsPort, `shop-pr.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);
    // Production is not bound: it stays with the most specific domain.
    expect((await team.api.get(`/dns/resource/application/${prod}`)).body.hostnames[0]).toMatchObject({ domain_uuid: inner, binding: "suffix_match", state: "synced" });

    // A higher-priority binding of the preview environment itself (by id) to the inner domain wins.
    const previewEnv = (await team.api.get(`/projects/${projectUuid}`)).body.environments.find((e: { name: string }) => e.name === "preview").id as number;
    const byId = await team.api.post(`/domains/${inner}/environment-bindings`, { environment_id: previewEnv, priority: 10 });
    expect(byId.status, JSON.stringify(byId.body)).toBe(201);
    await allSettled([outer, inner]);
    expect((await team.api.get(`/dns/resource/application/${preview}`)).body.hostnames[0]).toMatchObject({ domain_uuid: inner, binding: "environment_binding", state: "synced" });
    expect(await owner(`shop-pr.svc.b.${ZONE}`)).toEqual([`capstan-owner=${inner}`]);

    expect((await team.api.delete(`/domains/${inner}/environment-bindings/${byId.body.data.id}`)).status).toBe(200);
    expect((await team.api.delete(`/domains/${inner}/environment-bindings/${byId.body.data.id}`)).status).toBe(404);
    expect((await team.api.delete(`/domains/${inner}/environment-bindings/${b.body.data.id}`)).status).toBe(404);
    expect((await team.api.delete(`/domains/${outer}/environment-bindings/${b.body.data.id}`)).status).toBe(200);
    await allSettled([outer, inner]);
    expect(await owner(`shop-pr.svc.b.${ZONE}`)).toEqual([`capstan-owner=${inner}`]);
    expect(await dig(pdns.dnsPort, `shop-pr.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);
    // The hand-made record of the first test is still there.
    expect(await dig(pdns.dnsPort, `hand.svc.b.${ZONE}`, "A")).toEqual(["198.51.100.9"]);
  });
});

describe("records follow resources that leave with their environment or project, and services' hostnames", () => {
  it("deleting an environment, then a project, removes their applications' records after one reconcile; hand-made records stay", async () => {
    const temp = (await team.api.post("/projects", { name: "dnsres-temp" })).body.uuid as string;
    expect((await team.api.post(`/projects/${temp}/environments`, { name: "short" })).status).toBe(201);
    const inEnv = { project_uuid: temp, server_uuid: serverUuid, destination_uuid: destination, docker_registry_image_name: "nginx:1.27" };
    expect((await team.api.post("/applications/dockerimage", { ...inEnv, environment_name: "short", name: "a", fqdn: `https://env-gone.svc.b.${ZONE}` })).status).toBe(201);
    expect((await team.api.post("/applications/dockerimage", { ...inEnv, environment_name: "production", name: "b", fqdn: `https://project-gone.svc.b.${ZONE}` })).status).toBe(201);
    await allSettled([outer, inner]);
    expect(await dig(pdns.dnsPort, `env-gone.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);
    expect(await dig(pdns.dnsPort, `project-gone.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);

    expect((await team.api.delete(`/projects/${temp}/environments/short`)).status).toBeLessThan(300);
    await allSettled([outer, inner]);
    expect(await dig(pdns.dnsPort, `env-gone.svc.b.${ZONE}`, "A")).toEqual([]);
    expect(await dig(pdns.dnsPort, `_capstan.env-gone.svc.b.${ZONE}`, "TXT")).toEqual([]);
    expect(await dig(pdns.dnsPort, `project-gone.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);

    expect((await team.api.delete(`/projects/${temp}`)).status).toBeLessThan(300);
    await allSettled([outer, inner]);
    expect(await dig(pdns.dnsPort, `project-gone.svc.b.${ZONE}`, "A")).toEqual([]);
    expect(await dig(pdns.dnsPort, `hand.svc.b.${ZONE}`, "A")).toEqual(["198.51.100.9"]);
  });

  it("a service's component domains are its hostnames: listed with the component, written by resync, removed when the service goes", async () => {
    const svc = await team.api.post("/services", { project_uuid: projectUuid, environment_name: "production", server_uuid: serverUuid, destination_uuid: destination, type: "uptime-kuma", name: "kuma" });
    expect(svc.status, JSON.stringify(svc.body)).toBe(201);
    // No route of this version sets a component's domain (the proxy routes of services come later): set as one would.
    const row = await t.instance.database.prisma.service.findUniqueOrThrow({ where: { uuid: svc.body.uuid }, include: { components: true } });
    const component = row.components.find((c) => c.kind === "application")!;
    await t.instance.database.prisma.serviceComponent.update({ where: { id: component.id }, data: { fqdn: `https://kuma.svc.b.${ZONE}` } });

    const before = (await team.api.get(`/dns/resource/service/${svc.body.uuid}`)).body;
    expect(before).toMatchObject({ resource_type: "service", hostnames: [{ hostname: `kuma.svc.b.${ZONE}`, component: component.name, domain_uuid: inner, binding: "suffix_match", state: "pending" }] });
    const go = await team.api.post(`/dns/resource/service/${svc.body.uuid}/resync`);
    expect(go.status).toBe(202);
    await allSettled([outer, inner]);
    expect((await team.api.get(`/dns/resource/service/${svc.body.uuid}`)).body.hostnames[0].state).toBe("synced");
    expect(await dig(pdns.dnsPort, `kuma.svc.b.${ZONE}`, "A")).toEqual([SERVER_IP]);

    expect((await team.api.delete(`/services/${svc.body.uuid}`)).status).toBeLessThan(300);
    await allSettled([outer, inner]);
    expect(await dig(pdns.dnsPort, `kuma.svc.b.${ZONE}`, "A")).toEqual([]);
  });
});
