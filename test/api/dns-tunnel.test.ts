import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboundFetch } from "../../control-plane/src/lib/outbound.js";
import { CallBudget, CloudflareTunnelProvider } from "../../control-plane/src/services/dns/providers/index.js";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { startFakeCloudflare, type FakeCloudflare } from "../support/fake-cloudflare.js";

/**
 * The cloudflare_tunnel provider (issue 21, w7) on a real control plane against the local
 * Cloudflare fake (test/support/fake-cloudflare.ts), which speaks the v4 shapes of zones,
 * dns_records and cfd_tunnel configurations and refuses an ingress list not ending in a
 * catch-all, as the real API does. A hand-made ingress rule, its catch-all and a hand-made
 * record are in place from the start and must survive every reconcile untouched.
 */
let t: TestInstance;
let cf: FakeCloudflare;
let team: TeamFixture;
let serverUuid: string;
let destination: string;
let projectUuid: string;
let providerUuid: string;
let tunnelId: string;
const keys = new KeyFactory();
const TOKEN = "cf-tunnel-token-0123456789abcdef";
const ACCOUNT = "0123456789abcdef0123456789abcdef";
const ZONE = "tun.test";
const SERVER_IP = "203.0.113.9";
const ORIGIN = `http://${SERVER_IP}:80`;
const HAND_RULE = { hostname: "hand.apps.tun.test", service: "http://10.1.2.3:8080", originRequest: { noTLSVerify: true } };
const HAND_CATCH_ALL = { service: "http_status:503" };

const target = () => `${tunnelId}.cfargotunnel.com`;
const settled = async (uuid: string) => {
  await expect.poll(async () => (await team.api.get(`/domains/${uuid}`)).body.reconcile.state, { timeout: 60_000, interval: 50 }).toBe("idle");
  return (await team.api.get(`/domains/${uuid}`)).body;
};
const ingress = () => cf.ingress(ACCOUNT, tunnelId);
const records = (suffix = "") => cf.records(ZONE).filter((r) => r.name.endsWith(suffix)).map((r) => [r.name, r.type, r.content, r.proxied] as const).sort();
const handRecord = () => cf.records(ZONE).filter((r) => r.name === "legacy.apps.tun.test").map((r) => [r.type, r.content]);

beforeAll(async () => {
  cf = await startFakeCloudflare();
  cf.tokens.add(TOKEN);
  const zoneId = cf.addZone(ZONE);
  tunnelId = cf.addTunnel(ACCOUNT, { ingress: [HAND_RULE, HAND_CATCH_ALL] });
  // A record made by hand in the zone, under the managed domain.
  const hand = await fetch(`${cf.url}/zones/${zoneId}/dns_records`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
    body: JSON.stringify({ type: "A", name: "legacy.apps.tun.test", content: "198.51.100.77", ttl: 3600 }),
  });
  expect(hand.status).toBe(200);
  t = await startTestInstance({ PLATFORM_CLOUDFLARE_API_URL: cf.url });
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["DNS_PROVIDER_MANAGEMENT", "DNS_MULTI_DOMAIN"] });
  const key = (await team.api.post("/security/keys", { name: "k", private_key: (await keys.generate("ed25519")).privateKey })).body;
  serverUuid = (await team.api.post("/servers", { name: "web", ip: SERVER_IP, private_key_uuid: key.uuid })).body.uuid;
  destination = (await team.api.get(`/servers/${serverUuid}`)).body.destinations[0].uuid;
  projectUuid = (await team.api.post("/projects", { name: "tunnel" })).body.uuid;
}, 300_000);

afterAll(async () => {
  await t?.close();
  await cf?.close();
});

describe("cloudflare_tunnel providers", () => {
  it("are created with the token masked, the account and tunnel shown; bad credentials name the field", async () => {
    const r = await team.api.post("/dns-providers", { name: "tunnel", type: "cloudflare_tunnel", credentials: { api_token: TOKEN, account_id: ACCOUNT, tunnel_id: tunnelId.toUpperCase() } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.data).toMatchObject({ type: "cloudflare_tunnel", credentials: { api_token: "****cdef", account_id: ACCOUNT, tunnel_id: tunnelId }, is_usable: false });
    expect(JSON.stringify(r.body)).not.toContain(TOKEN);
    providerUuid = r.body.data.uuid;
    for (const [credentials, field] of [
      [{ api_token: TOKEN, account_id: ACCOUNT }, "credentials.tunnel_id"],
      [{ api_token: TOKEN, account_id: "acct", tunnel_id: tunnelId }, "credentials.account_id"],
      [{ api_token: TOKEN, account_id: ACCOUNT, tunnel_id: "../../zones" }, "credentials.tunnel_id"],
      [{ api_token: TOKEN, account_id: ACCOUNT, tunnel_id: tunnelId, zone: "x" }, "credentials.zone"],
    ] as const) {
      const bad = await team.api.post("/dns-providers", { name: "bad", type: "cloudflare_tunnel", credentials });
      expect(bad.status, JSON.stringify(bad.body)).toBe(422);
      expect(Object.keys(bad.body.errors)).toContain(field);
    }
  });

  it("test checks the token and that the account's tunnel exists and is managed remotely", async () => {
    const ok = await team.api.post(`/dns-providers/${providerUuid}/test`);
    expect(ok.body).toMatchObject({ connected: true });
    expect((await team.api.get(`/dns-providers/${providerUuid}`)).body.is_usable).toBe(true);
    const local = cf.addTunnel(ACCOUNT, { remoteConfig: false });
    const cases = [
      [{ api_token: TOKEN, account_id: ACCOUNT, tunnel_id: "00000000-0000-4000-8000-000000000000" }, /Tunnel not found/],
      [{ api_token: TOKEN, account_id: ACCOUNT, tunnel_id: local }, /managed locally/],
      [{ api_token: "not-the-token-0000", account_id: ACCOUNT, tunnel_id: tunnelId }, /Authentication error/],
    ] as const;
    for (const [credentials, error] of cases) {
      const p = await team.api.post("/dns-providers", { name: "other", type: "cloudflare_tunnel", credentials });
      expect(p.status).toBe(201);
      const r = await team.api.post(`/dns-providers/${p.body.data.uuid}/test`);
      expect(r.status).toBe(200);
      expect(r.body.connected).toBe(false);
      expect(r.body.error).toMatch(error);
      expect((await team.api.delete(`/dns-providers/${p.body.data.uuid}`)).status).toBe(200);
    }
  });

  it("the fake refuses an ingress list without a catch-all last, in Cloudflare's error shape, and the provider reports it", async () => {
    // A budget of its own: the 429 below pauses the token for what counts against this budget only.
    const p = new CloudflareTunnelProvider({ api_token: TOKEN, account_id: ACCOUNT, tunnel_id: tunnelId }, outboundFetch({ allowPrivate: true }), cf.url, undefined, new CallBudget(100, 60_000, 10_000));
    const before = ingress();
    await expect(p.putConfig({ ingress: [{ hostname: "x.tun.test", service: ORIGIN }] })).rejects.toThrow(/HTTP 400: .*last ingress rule must match all URLs/);
    await expect(p.putConfig({ ingress: [{ service: "http_status:404" }, { hostname: "x.tun.test", service: ORIGIN }] })).rejects.toThrow(/HTTP 400/);
    const raw = await fetch(`${cf.url}/accounts/${ACCOUNT}/cfd_tunnel/${tunnelId}/configurations`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ config: { ingress: [{ hostname: "x.tun.test", service: ORIGIN }] } }),
    });
    expect(raw.status).toBe(400);
    expect(await raw.json()).toMatchObject({ success: false, errors: [{ code: expect.any(Number), message: expect.stringMatching(/last ingress rule must match all URLs/) }], result: null });
    expect(ingress()).toEqual(before);
    // A 429 on the configuration is waited out (Retry-After) like on records.
    cf.rateLimitNext = 1;
    expect((await p.getConfig()).ingress).toEqual(before);
    // A Retry-After longer than a reconcile waits is reported at once, not cut short by a retry.
    cf.rateLimitNext = 1;
    cf.rateLimitRetryAfter = 120;
    const calls = cf.calls.length;
    try {
      await expect(p.getConfig()).rejects.toThrow(/rate limit was reached; it asks to wait 120 s/);
    } finally {
      cf.rateLimitRetryAfter = 1;
      cf.rateLimitNext = 0;
    }
    expect(cf.calls.length - calls).toBe(1);
    // The pause holds for the next calls with the token too: nothing is sent until it is over.
    await expect(p.getConfig()).rejects.toThrow(/asked to wait \d+ s more/);
    expect(cf.calls.length - calls).toBe(1);
  });
});

describe("a tunnel domain follows an application's hostnames", () => {
  let domain: string;
  let wild: string;
  let appUuid: string;

  it("a hostname gets an ingress rule before the others and a proxied CNAME to the tunnel; a name held by a hand-made rule is drift", async () => {
    const d = await team.api.post("/domains", { name: "apps.tun.test", zone: ZONE, dns_provider_uuid: providerUuid, routing_mode: "per_hostname" });
    expect(d.status, JSON.stringify(d.body)).toBe(201);
    domain = d.body.data.uuid;
    const app = await team.api.post("/applications/dockerimage", {
      project_uuid: projectUuid,
      environment_name: "production",
      server_uuid: serverUuid,
      destination_uuid: destination,
      name: "web",
      docker_registry_image_name: "nginx:1.27",
      fqdn: "https://shop.apps.tun.test,https://hand.apps.tun.test",
    });
    expect(app.status, JSON.stringify(app.body)).toBe(201);
    appUuid = app.body.uuid;
    const after = await settled(domain);
    expect(after).toMatchObject({ sync_status: "drifted", drift: [{ name: "hand.apps.tun.test", type: "INGRESS", content: HAND_RULE.service }] });
    expect(ingress()).toEqual([{ hostname: "shop.apps.tun.test", service: ORIGIN }, HAND_RULE, HAND_CATCH_ALL]);
    expect(records(".apps.tun.test")).toEqual([
      ["_capstan.shop.apps.tun.test", "TXT", `"capstan-owner=${domain}"`, false],
      ["legacy.apps.tun.test", "A", "198.51.100.77", false],
      ["shop.apps.tun.test", "CNAME", target(), true],
    ]);
    expect(after.last_applied.created).toEqual(expect.arrayContaining([{ name: "shop.apps.tun.test", type: "INGRESS", content: ORIGIN }]));
    const hosts = (await team.api.get(`/dns/resource/application/${appUuid}`)).body.hostnames;
    expect(hosts.find((h: { hostname: string }) => h.hostname === "shop.apps.tun.test")).toMatchObject({ state: "synced", record: { name: "shop.apps.tun.test", type: "CNAME", content: target() } });
    expect(hosts.find((h: { hostname: string }) => h.hostname === "hand.apps.tun.test")).toMatchObject({ state: "drifted" });
  });

  it("a wildcard domain on the same tunnel adds its wildcard rule after the per-host rules and keeps the other domain's rules", async () => {
    const d = await team.api.post("/domains", { name: "wild.tun.test", zone: ZONE, dns_provider_uuid: providerUuid, routing_mode: "wildcard", server_uuid: serverUuid });
    wild = d.body.data.uuid;
    expect((await team.api.post(`/domains/${wild}/sync`)).status).toBe(202);
    expect(await settled(wild)).toMatchObject({ sync_status: "synced" });
    expect(ingress()).toEqual([{ hostname: "shop.apps.tun.test", service: ORIGIN }, HAND_RULE, { hostname: "*.wild.tun.test", service: ORIGIN }, HAND_CATCH_ALL]);
    expect(records("wild.tun.test")).toEqual([
      ["*.wild.tun.test", "CNAME", target(), true],
      ["_capstan-wildcard.wild.tun.test", "TXT", `"capstan-owner=${wild}"`, false],
    ]);
    // Its reconcile again changes nothing (no PUT, no record call).
    const puts = () => cf.calls.filter((c) => c.method !== "GET").length;
    const before = puts();
    expect((await team.api.post(`/domains/${wild}/sync`)).status).toBe(202);
    expect(await settled(wild)).toMatchObject({ sync_status: "synced", last_applied: { created: [], updated: [], deleted: [] } });
    expect(puts()).toBe(before);
  });

  it("dry_run shows the rule and the record a reconcile would restore, and changes nothing; resync restores them", async () => {
    const t0 = cf.tunnels.get(`${ACCOUNT}/${tunnelId}`)!;
    // Both taken away by hand.
    t0.config = { ...t0.config!, ingress: t0.config!.ingress.filter((r) => r.hostname !== "shop.apps.tun.test") };
    const zone = cf.records(ZONE);
    zone.splice(zone.findIndex((r) => r.name === "shop.apps.tun.test"), 1);
    const snapshot = JSON.stringify([ingress(), records()]);
    const plan = await team.api.post(`/dns/resource/application/${appUuid}/resync?dry_run=true`);
    expect(plan.status, JSON.stringify(plan.body)).toBe(200);
    const mine = plan.body.plans.find((p: { domain_uuid: string }) => p.domain_uuid === domain);
    expect(mine.creates).toEqual(expect.arrayContaining([{ name: "shop.apps.tun.test", type: "CNAME", content: target() }, { name: "shop.apps.tun.test", type: "INGRESS", content: ORIGIN }]));
    expect(mine.drift).toEqual([expect.objectContaining({ name: "hand.apps.tun.test", type: "INGRESS" })]);
    expect(JSON.stringify([ingress(), records()])).toBe(snapshot);
    expect((await team.api.post(`/dns/resource/application/${appUuid}/resync`)).status).toBe(202);
    await settled(domain);
    expect(ingress()).toEqual([{ hostname: "shop.apps.tun.test", service: ORIGIN }, HAND_RULE, { hostname: "*.wild.tun.test", service: ORIGIN }, HAND_CATCH_ALL]);
    expect(records("shop.apps.tun.test")).toEqual([
      ["_capstan.shop.apps.tun.test", "TXT", `"capstan-owner=${domain}"`, false],
      ["shop.apps.tun.test", "CNAME", target(), true],
    ]);
  });

  it("an fqdn change moves the rule and the CNAME in one reconcile; the hand-made rule, catch-all and record stay", async () => {
    expect((await team.api.patch(`/applications/${appUuid}`, { fqdn: "https://store.apps.tun.test" })).status).toBe(200);
    expect(await settled(domain)).toMatchObject({ sync_status: "synced", drift: [] });
    expect(ingress()).toEqual([{ hostname: "store.apps.tun.test", service: ORIGIN }, HAND_RULE, { hostname: "*.wild.tun.test", service: ORIGIN }, HAND_CATCH_ALL]);
    expect(records(".apps.tun.test")).toEqual([
      ["_capstan.store.apps.tun.test", "TXT", `"capstan-owner=${domain}"`, false],
      ["legacy.apps.tun.test", "A", "198.51.100.77", false],
      ["store.apps.tun.test", "CNAME", target(), true],
    ]);
  });

  it("deleting the application removes its rule and CNAME; deleting the domains removes theirs; what was made by hand stays", async () => {
    expect((await team.api.delete(`/applications/${appUuid}`)).status).toBeLessThan(300);
    await settled(domain);
    expect(ingress()).toEqual([HAND_RULE, { hostname: "*.wild.tun.test", service: ORIGIN }, HAND_CATCH_ALL]);
    expect(records(".apps.tun.test")).toEqual([["legacy.apps.tun.test", "A", "198.51.100.77", false]]);
    expect((await team.api.delete(`/domains/${wild}`)).status).toBe(200);
    expect((await team.api.delete(`/domains/${domain}`)).status).toBe(200);
    expect(ingress()).toEqual([HAND_RULE, HAND_CATCH_ALL]);
    expect(records()).toEqual([["legacy.apps.tun.test", "A", "198.51.100.77", false]]);
    expect(handRecord()).toEqual([["A", "198.51.100.77"]]);
  });
});

describe("two domains on one tunnel", () => {
  it("reconciling at the same time, each keeps the other's rule (one read-merge-write of the tunnel at a time)", async () => {
    const made = [];
    for (const name of ["w1.tun.test", "w2.tun.test"]) {
      const d = await team.api.post("/domains", { name, zone: ZONE, dns_provider_uuid: providerUuid, routing_mode: "wildcard", server_uuid: serverUuid });
      expect(d.status).toBe(201);
      made.push(d.body.data.uuid as string);
    }
    let open!: () => void;
    cf.gate = new Promise<void>((r) => (open = r));
    try {
      for (const uuid of made) expect((await team.api.post(`/domains/${uuid}/sync`)).status).toBe(202);
      // Both reconciles have started before the provider answers anything.
      for (const uuid of made) await expect.poll(async () => (await team.api.get(`/domains/${uuid}`)).body.reconcile.state, { timeout: 10_000 }).toBe("running");
    } finally {
      cf.gate = null;
      open();
    }
    for (const uuid of made) expect(await settled(uuid)).toMatchObject({ sync_status: "synced" });
    expect(ingress()).toEqual([HAND_RULE, { hostname: "*.w1.tun.test", service: ORIGIN }, { hostname: "*.w2.tun.test", service: ORIGIN }, HAND_CATCH_ALL]);
    for (const uuid of made) expect((await team.api.delete(`/domains/${uuid}`)).status).toBe(200);
    expect(ingress()).toEqual([HAND_RULE, HAND_CATCH_ALL]);
  });

  it("a write of the tunnel by someone else between our read and our write (another replica) is noticed by its version; the other domains reconcile again and put their rules back", async () => {
    const made = [];
    for (const name of ["w3.tun.test", "w4.tun.test"]) {
      const d = await team.api.post("/domains", { name, zone: ZONE, dns_provider_uuid: providerUuid, routing_mode: "wildcard", server_uuid: serverUuid });
      made.push(d.body.data.uuid as string);
    }
    const [a, b] = made as [string, string];
    expect((await team.api.post(`/domains/${a}/sync`)).status).toBe(202);
    await settled(a);
    const w3 = { hostname: "*.w3.tun.test", service: ORIGIN };
    expect(ingress()).toContainEqual(w3);
    // As another replica would leave it: w3's rule had not landed yet when w4's reconcile read the list,
    const tunnel = cf.tunnels.get(`${ACCOUNT}/${tunnelId}`)!;
    tunnel.config = { ...tunnel.config!, ingress: tunnel.config!.ingress.filter((r) => r.hostname !== w3.hostname) };
    // and lands between w4's read and w4's write, which then drops it.
    cf.beforeNextConfigPut = (tn) => {
      tn.config = { ...tn.config!, ingress: [w3, ...tn.config!.ingress] };
      tn.version++;
    };
    expect((await team.api.post(`/domains/${b}/sync`)).status).toBe(202);
    await settled(b);
    expect(cf.beforeNextConfigPut).toBeNull();
    // w3's domain was reconciled again and put its rule back.
    await expect.poll(() => ingress(), { timeout: 30_000, interval: 50 }).toEqual([HAND_RULE, { hostname: "*.w4.tun.test", service: ORIGIN }, w3, HAND_CATCH_ALL]);
    await settled(a);
    for (const uuid of made) expect((await team.api.delete(`/domains/${uuid}`)).status).toBe(200);
    expect(ingress()).toEqual([HAND_RULE, HAND_CATCH_ALL]);
  });
});
