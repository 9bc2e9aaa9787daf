import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type ApiResponse, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { startFakeCloudflare, type FakeCloudflare } from "../support/fake-cloudflare.js";
import { dig, KNOT_TEST_TSIG, startKnot, startPowerDns, type KnotServer, type PowerDnsServer } from "../support/dns-servers.js";

/**
 * /dns-providers and /domains (spec 4.14, issue 21) on a real control plane, against a real
 * PowerDNS and a real Knot (RFC 2136 + TSIG) started by test/services/, and the local Cloudflare
 * fake (PLATFORM_CLOUDFLARE_API_URL points at it). The instance allows private endpoints: the DNS
 * servers are on loopback. Answers are checked with kdig.
 */
let t: TestInstance;
let pdns: PowerDnsServer;
let knot: KnotServer;
let cf: FakeCloudflare;
let team: TeamFixture;
let serverUuid: string;
const keys = new KeyFactory();
const seen: string[] = [];
const CF_TOKEN = "cf-token-secret-9f8e7d6c5b4a";
const SERVER_IP = "203.0.113.5";

const track = async <T = any>(p: Promise<ApiResponse<T>>): Promise<ApiResponse<T>> => {
  const r = await p;
  seen.push(JSON.stringify(r.body ?? null));
  return r;
};

/**
 * POST /domains/{uuid}/sync dispatches the reconcile job (202); this waits for it to end and
 * answers what the job recorded on the domain, in the shape the synchronous sync used to answer.
 */
const syncAndWait = async (uuid: string) => {
  const r = await track(team.api.post(`/domains/${uuid}/sync`));
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  // "already" when an application change dispatched one just before (records follow resources).
  expect(["dispatched", "already"]).toContain(r.body.dispatch);
  let d: any;
  await expect
    .poll(async () => {
      d = (await track(team.api.get(`/domains/${uuid}`))).body;
      return d.reconcile.state;
    }, { timeout: 60_000, interval: 50 })
    .toBe("idle");
  return { status: 200, body: { sync_status: d.sync_status, applied: d.last_applied, drift: d.drift, ...(d.sync_error ? { error: d.sync_error } : {}) } };
};

const pdnsBody = (name = "pdns") => ({ name, type: "powerdns", credentials: { api_url: pdns.apiUrl, api_key: pdns.apiKey } });

beforeAll(async () => {
  [pdns, knot, cf] = await Promise.all([startPowerDns(), startKnot("knot.test"), startFakeCloudflare()]);
  await pdns.addZone("example.test");
  cf.tokens.add(CF_TOKEN);
  cf.addZone("cf.test");
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true", PLATFORM_CLOUDFLARE_API_URL: cf.url });
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["DNS_PROVIDER_MANAGEMENT"] });
  const key = (await team.api.post("/security/keys", { name: "k", private_key: (await keys.generate("ed25519")).privateKey })).body;
  serverUuid = (await team.api.post("/servers", { name: "web", ip: SERVER_IP, private_key_uuid: key.uuid })).body.uuid;
}, 300_000);

afterAll(async () => {
  await t?.close();
  await Promise.all([pdns?.stop(), knot?.stop(), cf?.close()]);
});

describe("feature gates", () => {
  it("every DNS route answers 402 without DNS_PROVIDER_MANAGEMENT, naming it", async () => {
    const other = await t.newTeam();
    for (const [method, path] of [["get", "/dns-providers"], ["post", "/dns-providers"], ["get", "/domains"], ["post", "/domains/x/sync"]] as const) {
      const r = await (method === "get" ? other.api.get(path) : other.api.post(path, {}));
      expect(r.status, path).toBe(402);
      expect(r.body.message).toContain("DNS_PROVIDER_MANAGEMENT");
    }
  });

  it("the free tier has one provider; a second needs DNS_MULTI_DOMAIN (402), then works", async () => {
    const own = await t.newTeam();
    await t.instance.admin.setTeamFeatures(own.teamId, { enable: ["DNS_PROVIDER_MANAGEMENT"] });
    expect((await own.api.post("/dns-providers", pdnsBody("one"))).status).toBe(201);
    const second = await own.api.post("/dns-providers", pdnsBody("two"));
    expect(second.status).toBe(402);
    expect(second.body.message).toContain("DNS_MULTI_DOMAIN");
    expect((await own.api.get("/dns-providers")).body.data).toHaveLength(1);
    await t.instance.admin.setTeamFeatures(own.teamId, { enable: ["DNS_MULTI_DOMAIN"] });
    expect((await own.api.post("/dns-providers", pdnsBody("two"))).status).toBe(201);
  });
});

describe("providers", () => {
  it("creates each type with credentials masked, tests them against the real servers, and never returns a secret", async () => {
    await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["DNS_MULTI_DOMAIN"] });
    const made = [
      await track(team.api.post("/dns-providers", pdnsBody())),
      await track(team.api.post("/dns-providers", { name: "knot", type: "rfc2136", credentials: { server: knot.server, port: knot.port, zone: "knot.test", ...KNOT_TEST_TSIG } })),
      await track(team.api.post("/dns-providers", { name: "cf", type: "cloudflare", credentials: { api_token: CF_TOKEN } })),
    ];
    for (const r of made) expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(made[0]!.body.data.credentials).toEqual({ api_url: pdns.apiUrl, api_key: `****${pdns.apiKey.slice(-4)}`, server_id: "localhost" });
    expect(made[1]!.body.data.credentials).toMatchObject({ server: "127.0.0.1", port: knot.port, zone: "knot.test", key_name: KNOT_TEST_TSIG.key_name, algorithm: "hmac-sha256", secret: "****" });
    expect(made[2]!.body.data.credentials).toEqual({ api_token: `****${CF_TOKEN.slice(-4)}` });
    for (const r of made) {
      const test = await track(team.api.post(`/dns-providers/${r.body.data.uuid}/test`));
      expect(test.body, r.body.data.type).toEqual({ message: "The DNS provider accepted the credentials.", connected: true });
      const after = await track(team.api.get(`/dns-providers/${r.body.data.uuid}`));
      expect(after.body).toMatchObject({ is_usable: true, last_test_error: null });
    }
    const list = await track(team.api.get("/dns-providers"));
    expect(list.body.data.map((p: { type: string }) => p.type)).toEqual(["powerdns", "rfc2136", "cloudflare"]);
    const stored = await t.instance.database.prisma.dnsProvider.findMany({ where: { teamId: team.teamId } });
    for (const row of stored) expect(row.credentials).not.toMatch(/api_key|secret|api_token/);
  });

  it("a wrong key is a 200 with connected false and a reason, recorded on the provider", async () => {
    const bad = await track(team.api.post("/dns-providers", { name: "bad", type: "powerdns", credentials: { api_url: pdns.apiUrl, api_key: "wrong-pdns-key-1234" } }));
    const test = await track(team.api.post(`/dns-providers/${bad.body.data.uuid}/test`));
    expect(test.status).toBe(200);
    expect(test.body).toMatchObject({ connected: false, error: expect.stringContaining("401") });
    expect((await track(team.api.get(`/dns-providers/${bad.body.data.uuid}`))).body).toMatchObject({ is_usable: false, last_test_error: expect.stringContaining("401") });
    expect((await team.api.delete(`/dns-providers/${bad.body.data.uuid}`)).status).toBe(200);
  });

  it("bad bodies are 422 naming the field, and change nothing", async () => {
    const before = (await team.api.get("/dns-providers")).body.data.length;
    const cases = [
      [{ name: "x", type: "route53", credentials: {} }, "type"],
      [{ name: "x", type: "powerdns", credentials: { api_url: "ftp://x", api_key: "k" } }, "credentials.api_url"],
      [{ name: "x", type: "rfc2136", credentials: { server: "a b", zone: "knot.test", key_name: "k", secret: "c2VjcmV0" } }, "credentials.server"],
      [{ name: "x", type: "cloudflare", credentials: { api_token: "t", extra: 1 } }, "credentials.extra"],
    ] as const;
    for (const [body, field] of cases) {
      const r = await team.api.post("/dns-providers", body);
      expect(r.status, JSON.stringify(r.body)).toBe(422);
      expect(Object.keys(r.body.errors ?? {}), JSON.stringify(r.body)).toContain(field);
    }
    expect((await team.api.get("/dns-providers")).body.data.length).toBe(before);
  });
});

describe("domains and sync", () => {
  const providerUuid = async (type: string) => (await team.api.get("/dns-providers")).body.data.find((p: { type: string }) => p.type === type).uuid as string;

  it("wildcard mode on PowerDNS: sync writes *.domain to the server's address; a hand-made record survives byte-identical", async () => {
    // Made by hand in the zone, before Capstan: a name the domain's wildcard does not need, and one it does.
    await pdns.replaceRRset("example.test", "mail.example.test", "A", ["198.51.100.25"], 3600);
    await pdns.replaceRRset("example.test", "*.legacy.example.test", "A", ["198.51.100.26"], 3600);
    const zoneBefore = async () => {
      const res = await fetch(`${pdns.apiUrl}/api/v1/servers/localhost/zones/example.test.`, { headers: { "X-API-Key": pdns.apiKey } });
      const z = (await res.json()) as { rrsets: { name: string }[] };
      return JSON.stringify(z.rrsets.filter((s) => s.name === "mail.example.test." || s.name === "*.legacy.example.test."));
    };
    const foreign = await zoneBefore();

    const created = await track(team.api.post("/domains", { name: "apps.example.test", zone: "example.test", dns_provider_uuid: await providerUuid("powerdns"), routing_mode: "wildcard", server_uuid: serverUuid }));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.data).toMatchObject({ name: "apps.example.test", zone: "example.test", routing_mode: "wildcard", server_uuid: serverUuid, sync_status: "never" });
    const uuid = created.body.data.uuid;
    expect(await dig(pdns.dnsPort, "web.apps.example.test", "A")).toEqual([]);

    const sync = await syncAndWait(uuid);
    expect(sync.status).toBe(200);
    expect(sync.body).toMatchObject({ sync_status: "synced", drift: [] });
    expect(sync.body.applied.created).toEqual([
      { name: "_capstan-wildcard.apps.example.test", type: "TXT", content: `capstan-owner=${uuid}` },
      { name: "*.apps.example.test", type: "A", content: SERVER_IP },
    ]);
    expect(await dig(pdns.dnsPort, "web.apps.example.test", "A")).toEqual([SERVER_IP]);
    expect(await dig(pdns.dnsPort, "mail.example.test", "A")).toEqual(["198.51.100.25"]);
    expect(await zoneBefore()).toBe(foreign);

    // A second sync has nothing to do.
    const again = await syncAndWait(uuid);
    expect(again.body.applied).toEqual({ created: [], updated: [], deleted: [] });

    // Deleting the domain removes its own records only.
    expect((await track(team.api.delete(`/domains/${uuid}`))).status).toBe(200);
    expect(await dig(pdns.dnsPort, "web.apps.example.test", "A")).toEqual([]);
    expect(await dig(pdns.dnsPort, "_capstan-wildcard.apps.example.test", "TXT")).toEqual([]);
    expect(await zoneBefore()).toBe(foreign);
  });

  it("a hand-made record where the wildcard goes is reported as drift and left as it is", async () => {
    const created = await track(team.api.post("/domains", { name: "legacy.example.test", zone: "example.test", dns_provider_uuid: await providerUuid("powerdns"), server_uuid: serverUuid }));
    const uuid = created.body.data.uuid;
    const sync = await syncAndWait(uuid);
    expect(sync.body).toMatchObject({ sync_status: "drifted", applied: { created: [], updated: [], deleted: [] } });
    expect(sync.body.drift).toEqual([expect.objectContaining({ name: "*.legacy.example.test", type: "A", content: "198.51.100.26" })]);
    expect(await dig(pdns.dnsPort, "x.legacy.example.test", "A")).toEqual(["198.51.100.26"]);
    expect((await track(team.api.get(`/domains/${uuid}`))).body).toMatchObject({ sync_status: "drifted", drift: [expect.objectContaining({ name: "*.legacy.example.test" })] });
    expect((await team.api.delete(`/domains/${uuid}`)).status).toBe(200);
    expect(await dig(pdns.dnsPort, "x.legacy.example.test", "A")).toEqual(["198.51.100.26"]);
  });

  it("RFC 2136 (Knot) and Cloudflare domains sync the same way", async () => {
    const k = await track(team.api.post("/domains", { name: "knot.test", dns_provider_uuid: await providerUuid("rfc2136"), server_uuid: serverUuid }));
    expect(k.body.data.zone).toBe("knot.test");
    expect((await syncAndWait(k.body.data.uuid)).body.sync_status).toBe("synced");
    expect(await dig(knot.port, "anything.knot.test", "A")).toEqual([SERVER_IP]);

    const c = await track(team.api.post("/domains", { name: "apps.cf.test", zone: "cf.test", dns_provider_uuid: await providerUuid("cloudflare"), routing_mode: "hybrid", server_uuid: serverUuid }));
    expect((await syncAndWait(c.body.data.uuid)).body.sync_status).toBe("synced");
    expect(cf.records("cf.test").map((r) => [r.name, r.type, r.content]).sort()).toEqual([
      ["*.apps.cf.test", "A", SERVER_IP],
      ["_capstan-wildcard.apps.cf.test", "TXT", `"capstan-owner=${c.body.data.uuid}"`],
    ]);
    // per_hostname writes no wildcard.
    const p = await track(team.api.post("/domains", { name: "ph.cf.test", zone: "cf.test", dns_provider_uuid: await providerUuid("cloudflare"), routing_mode: "per_hostname" }));
    expect(p.status).toBe(201);
    expect((await syncAndWait(p.body.data.uuid)).body).toMatchObject({ sync_status: "synced", applied: { created: [] } });
    // A provider in use cannot be deleted.
    expect((await team.api.delete(`/dns-providers/${await providerUuid("cloudflare")}`)).status).toBe(409);
  });

  it("per_hostname on PowerDNS: an application's hostnames get records that follow its fqdn and its deletion, one sync each", async () => {
    await pdns.replaceRRset("example.test", "hand.ph.example.test", "A", ["198.51.100.40"], 3600);
    const d = await track(team.api.post("/domains", { name: "ph.example.test", zone: "example.test", dns_provider_uuid: await providerUuid("powerdns"), routing_mode: "per_hostname" }));
    expect(d.status, JSON.stringify(d.body)).toBe(201);
    const uuid = d.body.data.uuid;
    const project = (await team.api.post("/projects", { name: "dns-apps" })).body;
    const destination = (await team.api.get(`/servers/${serverUuid}`)).body.destinations[0].uuid;
    const app = await team.api.post("/applications/dockerimage", {
      project_uuid: project.uuid,
      environment_name: "production",
      server_uuid: serverUuid,
      destination_uuid: destination,
      name: "web",
      docker_registry_image_name: "nginx:1.27",
      fqdn: "https://shop.ph.example.test,https://hand.ph.example.test,https://elsewhere.test",
    });
    expect(app.status, JSON.stringify(app.body)).toBe(201);

    const first = await syncAndWait(uuid);
    expect(first.body.sync_status).toBe("drifted");
    expect(first.body.drift).toEqual([expect.objectContaining({ name: "hand.ph.example.test", content: "198.51.100.40" })]);
    expect(await dig(pdns.dnsPort, "shop.ph.example.test", "A")).toEqual([SERVER_IP]);
    expect(await dig(pdns.dnsPort, "hand.ph.example.test", "A")).toEqual(["198.51.100.40"]);

    // The fqdn changes: after one sync the old name is gone and the new one resolves.
    expect((await team.api.patch(`/applications/${app.body.uuid}`, { fqdn: "https://store.ph.example.test" })).status).toBe(200);
    const second = await syncAndWait(uuid);
    expect(second.body).toMatchObject({ sync_status: "synced", drift: [] });
    expect(await dig(pdns.dnsPort, "shop.ph.example.test", "A")).toEqual([]);
    expect(await dig(pdns.dnsPort, "_capstan.shop.ph.example.test", "TXT")).toEqual([]);
    expect(await dig(pdns.dnsPort, "store.ph.example.test", "A")).toEqual([SERVER_IP]);

    // Deleted: after one sync its name is gone; the hand-made record is still there.
    expect((await team.api.delete(`/applications/${app.body.uuid}`)).status).toBeLessThan(300);
    await syncAndWait(uuid);
    expect(await dig(pdns.dnsPort, "store.ph.example.test", "A")).toEqual([]);
    expect(await dig(pdns.dnsPort, "hand.ph.example.test", "A")).toEqual(["198.51.100.40"]);
  });

  it("sync is a durable job: 202 at once, state visible on GET, one reconcile per domain at a time, a request during a run runs it again", async () => {
    const d = await track(team.api.post("/domains", { name: "job.cf.test", zone: "cf.test", dns_provider_uuid: await providerUuid("cloudflare"), server_uuid: serverUuid }));
    const uuid = d.body.data.uuid;
    expect(d.body.data.reconcile).toEqual({ state: "idle", requested_at: null });
    let open!: () => void;
    cf.gate = new Promise<void>((r) => (open = r));
    cf.maxInFlight = 0;
    const listings = () => cf.calls.filter((c) => c.method === "GET" && c.path.endsWith("/dns_records")).length;
    const before = listings();
    try {
      // The provider does not answer, yet the request returns at once.
      const first = await track(team.api.post(`/domains/${uuid}/sync`));
      expect(first.status, JSON.stringify(first.body)).toBe(202);
      expect(first.body).toMatchObject({ dispatch: "dispatched", data: { uuid, sync_status: "never", reconcile: { state: expect.stringMatching(/^(pending|running)$/), requested_at: expect.any(String) } } });
      await expect.poll(async () => (await team.api.get(`/domains/${uuid}`)).body.reconcile.state, { timeout: 10_000 }).toBe("running");
      // Asked again during the run: no second reconcile at once.
      const second = await track(team.api.post(`/domains/${uuid}/sync`));
      expect(second.status).toBe(202);
      expect(second.body).toMatchObject({ dispatch: "already", data: { reconcile: { state: "running" } } });
      // The domain cannot be deleted under a running reconcile (it would leave records behind).
      expect((await team.api.delete(`/domains/${uuid}`)).status).toBe(409);
    } finally {
      cf.gate = null;
      open();
    }
    await expect.poll(async () => (await team.api.get(`/domains/${uuid}`)).body.reconcile.state, { timeout: 30_000 }).toBe("idle");
    const after = (await track(team.api.get(`/domains/${uuid}`))).body;
    expect(after).toMatchObject({ sync_status: "synced", sync_error: null });
    // The request made during the run was honoured by a second run, which found nothing to do.
    expect(listings() - before).toBe(2);
    expect(after.last_applied).toEqual({ created: [], updated: [], deleted: [] });
    // Never two calls to the provider at once for this domain.
    expect(cf.maxInFlight).toBe(1);
    expect(cf.records("cf.test").filter((r) => r.name === "*.job.cf.test").map((r) => r.content)).toEqual([SERVER_IP]);
    expect((await team.api.delete(`/domains/${uuid}`)).status).toBe(200);
    expect(cf.records("cf.test").filter((r) => r.name.endsWith("job.cf.test"))).toEqual([]);
  });

  it("bad domains are refused with the field named", async () => {
    const uuid = await providerUuid("powerdns");
    const cases = [
      [{ name: "*.x.example.test", dns_provider_uuid: uuid, server_uuid: serverUuid }, 422, "name"],
      [{ name: "a.other.test", zone: "example.test", dns_provider_uuid: uuid, server_uuid: serverUuid }, 422, "zone"],
      [{ name: "b.example.test", zone: "example.test", dns_provider_uuid: uuid }, 422, "server_uuid"],
      [{ name: "c.example.test", zone: "example.test", dns_provider_uuid: uuid, routing_mode: "round_robin", server_uuid: serverUuid }, 422, "routing_mode"],
      [{ name: "d.knot.test", zone: "example.test", dns_provider_uuid: await providerUuid("rfc2136"), server_uuid: serverUuid }, 422, "zone"],
    ] as const;
    for (const [body, status, field] of cases) {
      const r = await team.api.post("/domains", body);
      expect(r.status, JSON.stringify(r.body)).toBe(status);
      expect(Object.keys(r.body.errors ?? {}), JSON.stringify(r.body)).toContain(field);
    }
    expect((await team.api.post("/domains", { name: "knot.test", dns_provider_uuid: await providerUuid("rfc2136"), server_uuid: serverUuid })).status).toBe(409);
    expect((await team.api.post("/domains", { name: "e.example.test", zone: "example.test", dns_provider_uuid: "00000000-0000-4000-8000-000000000000", server_uuid: serverUuid })).status).toBe(404);
  });

  it("records follow applications by themselves on PowerDNS and Knot: create, fqdn change, delete, one reconcile each; hand-made records survive", async () => {
    // The Knot zone's wildcard domain (above) would answer every name: it goes first.
    const knotWildcard = (await team.api.get("/domains")).body.data.find((d: { name: string }) => d.name === "knot.test");
    expect((await team.api.delete(`/domains/${knotWildcard.uuid}`)).status).toBe(200);
    expect(await dig(knot.port, "anything.knot.test", "A")).toEqual([]);
    // Made by hand before Capstan, at names under the managed domains.
    await pdns.replaceRRset("example.test", "hand.follow.example.test", "A", ["198.51.100.60"], 3600);
    const knsupdate = spawnSync("knsupdate", [], {
      input: `server 127.0.0.1 ${knot.port}\nzone knot.test.\nkey ${KNOT_TEST_TSIG.algorithm}:${KNOT_TEST_TSIG.key_name} ${KNOT_TEST_TSIG.secret}\nupdate add hand.follow.knot.test. 3600 A 198.51.100.61\nsend\nquit\n`,
      encoding: "utf8",
    });
    expect(knsupdate.status, knsupdate.stderr).toBe(0);
    expect(await dig(knot.port, "hand.follow.knot.test", "A")).toEqual(["198.51.100.61"]);

    const pd = await track(team.api.post("/domains", { name: "follow.example.test", zone: "example.test", dns_provider_uuid: await providerUuid("powerdns"), routing_mode: "per_hostname" }));
    const kd = await track(team.api.post("/domains", { name: "follow.knot.test", dns_provider_uuid: await providerUuid("rfc2136"), routing_mode: "per_hostname" }));
    expect([pd.status, kd.status], JSON.stringify([pd.body, kd.body])).toEqual([201, 201]);
    const settled = async () => {
      for (const uuid of [pd.body.data.uuid, kd.body.data.uuid]) {
        await expect.poll(async () => (await team.api.get(`/domains/${uuid}`)).body.reconcile.state, { timeout: 60_000, interval: 50 }).toBe("idle");
      }
    };
    const project = (await team.api.post("/projects", { name: "dns-follow" })).body;
    const destination = (await team.api.get(`/servers/${serverUuid}`)).body.destinations[0].uuid;
    // Created with an fqdn under both domains: no sync asked, the names resolve after one reconcile.
    const app = await team.api.post("/applications/dockerimage", {
      project_uuid: project.uuid,
      environment_name: "production",
      server_uuid: serverUuid,
      destination_uuid: destination,
      name: "follow",
      docker_registry_image_name: "nginx:1.27",
      fqdn: "https://one.follow.example.test,https://one.follow.knot.test,https://hand.follow.knot.test",
    });
    expect(app.status, JSON.stringify(app.body)).toBe(201);
    await settled();
    expect(await dig(pdns.dnsPort, "one.follow.example.test", "A")).toEqual([SERVER_IP]);
    expect(await dig(knot.port, "one.follow.knot.test", "A")).toEqual([SERVER_IP]);
    // The hand-made name the application also claims is left alone and reported.
    expect(await dig(knot.port, "hand.follow.knot.test", "A")).toEqual(["198.51.100.61"]);
    expect((await team.api.get(`/domains/${kd.body.data.uuid}`)).body).toMatchObject({ sync_status: "drifted", drift: [expect.objectContaining({ name: "hand.follow.knot.test" })] });

    // The fqdn changes: the old names go, the new ones resolve.
    expect((await team.api.patch(`/applications/${app.body.uuid}`, { fqdn: "https://two.follow.example.test,https://two.follow.knot.test" })).status).toBe(200);
    await settled();
    expect(await dig(pdns.dnsPort, "one.follow.example.test", "A")).toEqual([]);
    expect(await dig(pdns.dnsPort, "_capstan.one.follow.example.test", "TXT")).toEqual([]);
    expect(await dig(knot.port, "one.follow.knot.test", "A")).toEqual([]);
    expect(await dig(pdns.dnsPort, "two.follow.example.test", "A")).toEqual([SERVER_IP]);
    expect(await dig(knot.port, "two.follow.knot.test", "A")).toEqual([SERVER_IP]);
    expect((await team.api.get(`/domains/${kd.body.data.uuid}`)).body).toMatchObject({ sync_status: "synced", drift: [] });

    // Deleted: its names go; every hand-made record is still there.
    expect((await team.api.delete(`/applications/${app.body.uuid}`)).status).toBeLessThan(300);
    await settled();
    expect(await dig(pdns.dnsPort, "two.follow.example.test", "A")).toEqual([]);
    expect(await dig(knot.port, "two.follow.knot.test", "A")).toEqual([]);
    expect(await dig(knot.port, "_capstan.two.follow.knot.test", "TXT")).toEqual([]);
    expect(await dig(pdns.dnsPort, "hand.follow.example.test", "A")).toEqual(["198.51.100.60"]);
    expect(await dig(knot.port, "hand.follow.knot.test", "A")).toEqual(["198.51.100.61"]);
    expect(await dig(pdns.dnsPort, "mail.example.test", "A")).toEqual(["198.51.100.25"]);
  });

  it("no response ever carried a secret", () => {
    const all = seen.join("\n");
    for (const secret of [pdns.apiKey, KNOT_TEST_TSIG.secret, CF_TOKEN, "wrong-pdns-key-1234"]) expect(all).not.toContain(secret);
  });
});
