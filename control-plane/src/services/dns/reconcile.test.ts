import { describe, expect, it } from "vitest";
import type { DnsRecord } from "./providers/types.js";
import { markerName, markerText, planZone } from "./reconcile.js";

const rec = (name: string, type: DnsRecord["type"], content: string, ttl = 300): DnsRecord => ({ id: `${name}|${type}|${content}`, name, type, content, ttl });

describe("DNS reconcile plan", () => {
  it("names the marker beside the record; a wildcard's marker is not under the wildcard", () => {
    expect(markerName("app.example.com")).toBe("_capstan.app.example.com");
    expect(markerName("*.apps.example.com.")).toBe("_capstan-wildcard.apps.example.com");
  });

  it("creates marker before record on an empty name", () => {
    const p = planZone([], [{ name: "a.example.com", type: "A", content: "192.0.2.1", ttl: 300 }], "o1");
    expect(p.creates).toEqual([
      { name: "_capstan.a.example.com", type: "TXT", content: markerText("o1"), ttl: 300 },
      { name: "a.example.com", type: "A", content: "192.0.2.1", ttl: 300 },
    ]);
    expect(p.drift).toEqual([]);
  });

  it("never touches a record without our marker (also one marked by another owner): drift", () => {
    const current = [rec("a.example.com", "A", "198.51.100.1"), rec("b.example.com", "CNAME", "x.example.net"), rec("_capstan.b.example.com", "TXT", markerText("someone-else"))];
    const p = planZone(current, [{ name: "a.example.com", type: "A", content: "192.0.2.1", ttl: 300 }, { name: "b.example.com", type: "A", content: "192.0.2.1", ttl: 300 }], "o1");
    expect(p.creates).toEqual([]);
    expect(p.updates).toEqual([]);
    expect(p.deletes).toEqual([]);
    expect(p.drift.map((d) => d.name)).toEqual(["a.example.com", "b.example.com"]);
  });

  it("updates our record in place, deletes what we no longer want, records last and marker after", () => {
    const current = [
      rec("_capstan.a.example.com", "TXT", markerText("o1")),
      rec("a.example.com", "A", "192.0.2.1"),
      rec("a.example.com", "AAAA", "2001:db8::1"),
      rec("_capstan.old.example.com", "TXT", markerText("o1")),
      rec("old.example.com", "A", "192.0.2.1"),
      rec("hand.example.com", "A", "192.0.2.1"),
    ];
    const p = planZone(current, [{ name: "a.example.com", type: "A", content: "192.0.2.2", ttl: 300 }], "o1");
    expect(p.updates).toEqual([{ existing: current[1], record: { name: "a.example.com", type: "A", content: "192.0.2.2", ttl: 300 } }]);
    expect(p.deletes.map((r) => r.id)).toEqual([current[2]!.id, current[4]!.id, current[3]!.id]);
    expect(p.drift).toEqual([]);
  });
});
