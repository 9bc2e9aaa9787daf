import { describe, expect, it } from "vitest";
import type { DnsRecord } from "./providers/types.js";
import { markerText } from "./reconcile.js";
import { originOf, planTunnel } from "./tunnel.js";

// ---- cloudflare_tunnel (issue 21, w7) ----

const rec = (name: string, type: DnsRecord["type"], content: string, ttl = 300): DnsRecord => ({ id: `${name}|${type}|${content}`, name, type, content, ttl });
const want = (name: string, address = "192.0.2.1") => ({ name, type: "A" as const, content: address, ttl: 300 });
const TARGET = "6ff42ae2-765d-4adf-8112-31c55c1551ef.cfargotunnel.com";
const marker = (name: string, owner = "d1") => rec(name.startsWith("*.") ? `_capstan-wildcard.${name.slice(2)}` : `_capstan.${name}`, "TXT", markerText(owner));

describe("tunnel plan", () => {
  it("an IPv6 server is bracketed in the origin", () => {
    expect(originOf("192.0.2.1")).toBe("http://192.0.2.1:80");
    expect(originOf("2001:db8::1")).toBe("http://[2001:db8::1]:80");
    expect(originOf("web.example.com")).toBe("http://web.example.com:80");
  });

  it("an unconfigured tunnel gets our rules, then a 404 catch-all; per-host before wildcard, the more specific wildcard first", () => {
    const p = planTunnel([], { ingress: [] }, [want("*.example.com"), want("*.a.example.com"), want("b.example.com"), want("a.example.com")], "d1", TARGET);
    expect(p.ingress).toEqual([
      { hostname: "a.example.com", service: "http://192.0.2.1:80" },
      { hostname: "b.example.com", service: "http://192.0.2.1:80" },
      { hostname: "*.a.example.com", service: "http://192.0.2.1:80" },
      { hostname: "*.example.com", service: "http://192.0.2.1:80" },
      { service: "http_status:404" },
    ]);
    expect(p.dns.creates.filter((r) => r.type === "CNAME").map((r) => [r.name, r.content, r.ttl])).toContainEqual(["a.example.com", TARGET, 1]);
  });

  it("keeps other rules, their order and fields, the catch-all found and the rest of the configuration", () => {
    const hand = [{ hostname: "x.example.com", service: "ssh://localhost:22" }, { hostname: "*.example.com", path: "/api", service: "http://10.0.0.1:8080", originRequest: { noTLSVerify: true } }];
    const config = { ingress: [{ hostname: "old.example.com", service: "http://192.0.2.1:80" }, ...hand, { service: "http_status:503" }], originRequest: { connectTimeout: 10 } };
    const p = planTunnel([marker("old.example.com"), rec("old.example.com", "CNAME", TARGET, 1)], config, [want("new.example.com"), want("*.w.example.com")], "d1", TARGET);
    expect(p.ingress).toEqual([{ hostname: "new.example.com", service: "http://192.0.2.1:80" }, ...hand, { hostname: "*.w.example.com", service: "http://192.0.2.1:80" }, { service: "http_status:503" }]);
    expect(p.config.originRequest).toEqual({ connectTimeout: 10 });
    expect(p.shown.creates).toContainEqual(expect.objectContaining({ name: "new.example.com", type: "INGRESS" }));
    expect(p.shown.deletes).toContainEqual(expect.objectContaining({ name: "old.example.com", type: "INGRESS" }));
    expect(p.dns.deletes.map((r) => r.name)).toEqual(["old.example.com", "_capstan.old.example.com"]);
  });

  it("a name held by someone else's rule or record is drift: no rule, no record; a rule of another domain is left alone", () => {
    const config = { ingress: [{ hostname: "hand.example.com", service: "http://10.0.0.9:80" }, { hostname: "other.example.com", service: "http://192.0.2.1:80" }, { service: "http_status:404" }] };
    const current = [rec("dns.example.com", "A", "198.51.100.1"), marker("other.example.com", "d2"), rec("other.example.com", "CNAME", TARGET, 1)];
    const p = planTunnel(current, config, [want("hand.example.com"), want("dns.example.com")], "d1", TARGET);
    expect(p.ingress).toBeNull();
    expect(p.dns.creates).toEqual([]);
    expect(p.shown.drift.map((d) => [d.name, d.type])).toEqual([["dns.example.com", "A"], ["hand.example.com", "INGRESS"]]);
  });

  it("a rule of ours that is right is not rewritten; a wrong one is updated; nothing to do means no PUT", () => {
    const current = [marker("a.example.com"), rec("a.example.com", "CNAME", TARGET, 1)];
    const right = { hostname: "a.example.com", service: "http://192.0.2.1:80", originRequest: { httpHostHeader: "a.example.com" } };
    expect(planTunnel(current, { ingress: [right, { service: "http_status:404" }] }, [want("a.example.com")], "d1", TARGET).ingress).toBeNull();
    const moved = planTunnel(current, { ingress: [right, { service: "http_status:404" }] }, [want("a.example.com", "192.0.2.2")], "d1", TARGET);
    expect(moved.ingress).toEqual([{ hostname: "a.example.com", service: "http://192.0.2.2:80" }, { service: "http_status:404" }]);
    expect(moved.shown.updates.map((u) => [u.record.type, u.record.content])).toEqual([["INGRESS", "http://192.0.2.2:80"]]);
    expect(planTunnel([], { ingress: [] }, [], "d1", TARGET).ingress).toBeNull();
  });
});
