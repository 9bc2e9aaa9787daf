import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboundFetch } from "../../control-plane/src/lib/outbound.js";
import { CloudflareProvider, PowerDnsProvider, Rfc2136Provider, type DnsProvider } from "../../control-plane/src/services/dns/providers/index.js";
import { applyPlan, markerName, markerText, planZone } from "../../control-plane/src/services/dns/reconcile.js";
import { startFakeCloudflare, type FakeCloudflare } from "../support/fake-cloudflare.js";
import { dig, KNOT_TEST_TSIG, startKnot, startPowerDns, type KnotServer, type PowerDnsServer } from "../support/dns-servers.js";

/**
 * The DNS provider layer (issue 21) against real servers: PowerDNS Authoritative (sqlite3
 * backend, HTTP API) and Knot (RFC 2136 updates and AXFR with TSIG), both started by
 * test/services/*.sh from Debian's packages; Cloudflare through the local fake speaking its v4
 * shapes. Answers are checked with a DNS client (kdig) where a real server answers.
 */
const allowAll = outboundFetch({ allowPrivate: true });

let pdns: PowerDnsServer;
let knot: KnotServer;
let cf: FakeCloudflare;
const ZONE = "capstan.test";

beforeAll(async () => {
  [pdns, knot, cf] = await Promise.all([startPowerDns(), startKnot(ZONE), startFakeCloudflare()]);
  await pdns.addZone(ZONE);
  cf.tokens.add("cf-token-good-0123456789");
  cf.addZone(ZONE);
}, 300_000);

afterAll(async () => {
  await Promise.all([pdns?.stop(), knot?.stop(), cf?.close()]);
});

const providers: [string, () => DnsProvider, (name: string, type: string) => Promise<string[]>][] = [
  ["powerdns", () => new PowerDnsProvider({ api_url: pdns.apiUrl, api_key: pdns.apiKey, server_id: "localhost" }, allowAll), (n, t) => dig(pdns.dnsPort, n, t)],
  ["rfc2136 (knot)", () => new Rfc2136Provider({ server: knot.server, port: knot.port, zone: ZONE, ...KNOT_TEST_TSIG }, { allowPrivate: true }), (n, t) => dig(knot.port, n, t)],
  [
    "cloudflare (local fake)",
    () => new CloudflareProvider({ api_token: "cf-token-good-0123456789" }, allowAll, cf.url),
    async (n, t) => cf.records(ZONE).filter((r) => r.name === n && r.type === t).map((r) => (t === "TXT" ? r.content : r.content)).sort(),
  ],
];

describe.each(providers)("DNS provider %s", (label, make, answers) => {
  const host = `p-${label.split(" ")[0]}.${ZONE}`;

  it("accepts its credentials", async () => {
    expect(await make().testCredentials()).toEqual({ ok: true });
  });

  it("creates, lists, updates and deletes records; the server answers accordingly", async () => {
    const p = make();
    await p.createRecord(ZONE, { name: host, type: "A", content: "192.0.2.10", ttl: 120 });
    await p.createRecord(ZONE, { name: host, type: "TXT", content: "hello capstan", ttl: 120 });
    expect(await answers(host, "A")).toEqual(["192.0.2.10"]);
    const listed = (await p.listRecords(ZONE)).filter((r) => r.name === host);
    expect(listed.map((r) => [r.type, r.content, r.ttl]).sort()).toEqual([["A", "192.0.2.10", 120], ["TXT", "hello capstan", 120]]);

    const a = listed.find((r) => r.type === "A")!;
    await p.updateRecord(ZONE, a, { name: host, type: "A", content: "192.0.2.11", ttl: 120 });
    expect(await answers(host, "A")).toEqual(["192.0.2.11"]);

    for (const r of (await p.listRecords(ZONE)).filter((r) => r.name === host)) await p.deleteRecord(ZONE, r);
    expect(await answers(host, "A")).toEqual([]);
    expect((await p.listRecords(ZONE)).filter((r) => r.name === host)).toEqual([]);
  });
});

describe("DNS provider credentials and addresses", () => {
  it("a wrong key or token is reported with a reason, never echoing the secret", async () => {
    const results = await Promise.all([
      new PowerDnsProvider({ api_url: pdns.apiUrl, api_key: "wrong-key-value", server_id: "localhost" }, allowAll).testCredentials(),
      new Rfc2136Provider({ server: knot.server, port: knot.port, zone: ZONE, ...KNOT_TEST_TSIG, secret: "d3Jvbmcta2V5LXZhbHVl" }, { allowPrivate: true }).testCredentials(),
      new CloudflareProvider({ api_token: "wrong-token-value" }, allowAll, cf.url).testCredentials(),
    ]);
    for (const r of results) {
      expect(r.ok).toBe(false);
      const error = (r as { error: string }).error;
      expect(error.length).toBeGreaterThan(5);
      expect(error).not.toMatch(/wrong-key-value|d3Jvbmcta2V5LXZhbHVl|wrong-token-value/);
    }
    expect((results[0] as { error: string }).error).toContain("401");
    expect((results[1] as { error: string }).error).toMatch(/BADSIG|NOTAUTH|BADKEY|TSIG/);
    expect((results[2] as { error: string }).error).toContain("401");
  });

  it("user-chosen servers on loopback are refused unless the instance allows private endpoints", async () => {
    const guarded = new PowerDnsProvider({ api_url: pdns.apiUrl, api_key: pdns.apiKey, server_id: "localhost" }, outboundFetch({ allowPrivate: false }));
    const r1 = await guarded.testCredentials();
    expect(r1).toMatchObject({ ok: false });
    expect((r1 as { error: string }).error).toContain("PLATFORM_ALLOW_PRIVATE_ENDPOINTS");
    const r2 = await new Rfc2136Provider({ server: "localhost", port: knot.port, zone: ZONE, ...KNOT_TEST_TSIG }, { allowPrivate: false }).testCredentials();
    expect(r2).toMatchObject({ ok: false });
    expect((r2 as { error: string }).error).toContain("PLATFORM_ALLOW_PRIVATE_ENDPOINTS");
  });

  it("values that would add a command to the update script are refused before anything is sent", async () => {
    const p = new Rfc2136Provider({ server: knot.server, port: knot.port, zone: ZONE, ...KNOT_TEST_TSIG }, { allowPrivate: true });
    await expect(p.createRecord(ZONE, { name: `x.${ZONE}`, type: "A", content: "192.0.2.1\nupdate delete capstan.test. NS", ttl: 60 })).rejects.toThrow(/not a plain DNS token/);
    expect(await dig(knot.port, ZONE, "NS")).toEqual([`ns1.${ZONE}.`]);
  });

  it("Cloudflare: a 429 is retried after Retry-After", async () => {
    const p = new CloudflareProvider({ api_token: "cf-token-good-0123456789" }, allowAll, cf.url);
    cf.rateLimitNext = 2;
    const before = cf.calls.length;
    expect(await p.testCredentials()).toEqual({ ok: true });
    expect(cf.calls.length - before).toBe(3);
  });
});

describe("reconcile on a real PowerDNS: plan, then apply; foreign records are never touched", () => {
  const zone = "owned.test";
  const owner = "domain-0f4c";
  const provider = () => new PowerDnsProvider({ api_url: pdns.apiUrl, api_key: pdns.apiKey, server_id: "localhost" }, allowAll);
  const rrsetsJson = async () => {
    const res = await fetch(`${pdns.apiUrl}/api/v1/servers/localhost/zones/${zone}.`, { headers: { "X-API-Key": pdns.apiKey } });
    const z = (await res.json()) as { rrsets: { name: string; type: string }[] };
    return z.rrsets;
  };

  it("leaves a hand-made record byte-identical, reports it as drift, and manages its own names", async () => {
    await pdns.addZone(zone);
    // Made by hand: the wildcard Capstan would want, and an unrelated name.
    await pdns.replaceRRset(zone, `*.apps.${zone}`, "A", ["198.51.100.7"], 600);
    await pdns.replaceRRset(zone, `www.${zone}`, "CNAME", [`elsewhere.example.`], 3600);
    const foreign = (sets: { name: string }[]) => JSON.stringify(sets.filter((s) => s.name === `*.apps.${zone}.` || s.name === `www.${zone}.`));
    const before = foreign(await rrsetsJson());

    const desired = [
      { name: `*.apps.${zone}`, type: "A" as const, content: "203.0.113.5", ttl: 300 },
      { name: `*.preview.${zone}`, type: "A" as const, content: "203.0.113.5", ttl: 300 },
    ];
    const p = provider();
    const plan = planZone(await p.listRecords(zone), desired, owner);
    expect(plan.drift).toEqual([expect.objectContaining({ name: `*.apps.${zone}`, type: "A", content: "198.51.100.7" })]);
    expect(plan.creates.map((r) => `${r.name} ${r.type}`)).toEqual([`${markerName(`*.preview.${zone}`)} TXT`, `*.preview.${zone} A`]);
    await applyPlan(p, zone, plan);

    expect(foreign(await rrsetsJson())).toBe(before);
    expect(await dig(pdns.dnsPort, `x.preview.${zone}`, "A")).toEqual(["203.0.113.5"]);
    expect(await dig(pdns.dnsPort, `x.apps.${zone}`, "A")).toEqual(["198.51.100.7"]);
    expect(await dig(pdns.dnsPort, `_capstan-wildcard.preview.${zone}`, "TXT")).toEqual([`"${markerText(owner)}"`]);

    // Again: nothing to do (the plan is stable), the drift is still reported.
    const again = planZone(await p.listRecords(zone), desired, owner);
    expect([again.creates, again.updates, again.deletes]).toEqual([[], [], []]);
    expect(again.drift).toHaveLength(1);

    // The address changes: our record follows, the hand-made one does not.
    const moved = desired.map((d) => ({ ...d, content: "203.0.113.9" }));
    await applyPlan(p, zone, planZone(await p.listRecords(zone), moved, owner));
    expect(await dig(pdns.dnsPort, `x.preview.${zone}`, "A")).toEqual(["203.0.113.9"]);
    expect(foreign(await rrsetsJson())).toBe(before);

    // Nothing desired any more: our records and marker go, the hand-made ones stay.
    const gone = planZone(await p.listRecords(zone), [], owner);
    expect(gone.deletes.map((r) => `${r.name} ${r.type}`)).toEqual([`*.preview.${zone} A`, `_capstan-wildcard.preview.${zone} TXT`]);
    await applyPlan(p, zone, gone);
    expect(await dig(pdns.dnsPort, `x.preview.${zone}`, "A")).toEqual([]);
    expect(await dig(pdns.dnsPort, `_capstan-wildcard.preview.${zone}`, "TXT")).toEqual([]);
    expect(foreign(await rrsetsJson())).toBe(before);
  });
});
