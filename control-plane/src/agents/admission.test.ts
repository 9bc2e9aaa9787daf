import { describe, expect, it } from "vitest";
import { addressKey, BUSY, HandshakeAdmission, THROTTLED } from "./admission.js";

const limits = { knownInFlight: 3, otherInFlight: 4, otherInFlightPerAddress: 2, failureBurst: 3, failureRefillMs: 1000, trackedAddresses: 5 };

describe("handshake admission", () => {
  it("keeps the known lane apart: other handshakes cannot take its room", () => {
    const a = new HandshakeAdmission(limits);
    const others = ["10.0.0.1", "10.0.0.2"].flatMap((ip) => [a.admit(ip, "other"), a.admit(ip, "other")]);
    expect(others.every((x) => x.ok)).toBe(true);
    expect(a.admit("10.0.0.3", "other")).toEqual({ ok: false, reason: BUSY }); // other lane full
    const known = [1, 2, 3].map(() => a.admit("10.0.0.1", "known"));
    expect(known.every((x) => x.ok)).toBe(true);
    expect(a.admit("10.0.0.9", "known")).toEqual({ ok: false, reason: BUSY });
    for (const k of known) if (k.ok) k.release();
    expect(a.admit("10.0.0.9", "known").ok).toBe(true);
  });

  it("limits other handshakes per source address, and a release gives the place back once", () => {
    const a = new HandshakeAdmission(limits);
    const first = a.admit("192.0.2.1", "other");
    const second = a.admit("192.0.2.1", "other");
    expect(a.admit("192.0.2.1", "other")).toEqual({ ok: false, reason: BUSY });
    expect(a.admit("192.0.2.2", "other").ok).toBe(true);
    if (!first.ok || !second.ok) throw new Error("admitted");
    first.release();
    first.release();
    expect(a.admit("192.0.2.1", "other").ok).toBe(true);
    expect(a.admit("192.0.2.1", "other")).toEqual({ ok: false, reason: BUSY });
  });

  it("throttles an address after its burst of failures, refills over time, and spares known agents", () => {
    let now = 0;
    const a = new HandshakeAdmission(limits, () => now);
    for (let i = 0; i < 3; i++) {
      expect(a.throttled("198.51.100.7")).toBe(false);
      a.failed("198.51.100.7");
    }
    expect(a.throttled("198.51.100.7")).toBe(true);
    expect(a.admit("198.51.100.7", "other")).toEqual({ ok: false, reason: THROTTLED });
    expect(a.admit("198.51.100.7", "known").ok).toBe(true);
    expect(a.admit("198.51.100.8", "other").ok).toBe(true);
    now += 999;
    expect(a.throttled("198.51.100.7")).toBe(true);
    now += 1;
    expect(a.throttled("198.51.100.7")).toBe(false); // one attempt back per refill period
    a.failed("198.51.100.7");
    expect(a.throttled("198.51.100.7")).toBe(true);
  });

  it("a refill lets one guess through at a time: a handshake in flight holds the attempt it may use up", () => {
    let now = 0;
    const a = new HandshakeAdmission(limits, () => now);
    for (let i = 0; i < 3; i++) a.failed("198.51.100.7");
    now += 1000; // one attempt back
    const first = a.admit("198.51.100.7", "other");
    expect(first.ok).toBe(true);
    // Its outcome is not known yet: the next one waits (the per-address limit of 2 would allow it).
    expect(a.admit("198.51.100.7", "other")).toEqual({ ok: false, reason: THROTTLED });
    if (first.ok) first.release(); // it was a real agent after all (no failure)
    expect(a.admit("198.51.100.7", "other").ok).toBe(true);
    // An address without failures keeps its places in flight.
    expect([a.admit("198.51.100.9", "other").ok, a.admit("198.51.100.9", "other").ok]).toEqual([true, true]);
  });

  it("remembers a bounded number of addresses, and forgets those whose bucket is full again", () => {
    let now = 0;
    const a = new HandshakeAdmission(limits, () => now);
    for (let i = 0; i < 50; i++) a.failed(`203.0.113.${i}`);
    expect(a.stats().trackedAddresses).toBe(5);
    for (let i = 0; i < 3; i++) a.failed("203.0.113.200");
    expect(a.throttled("203.0.113.200")).toBe(true);
    now += 3000;
    a.sweep();
    expect(a.stats().trackedAddresses).toBe(0);
  });

  it("counts IPv4-mapped addresses as IPv4 and IPv6 addresses by their /64", () => {
    expect(addressKey("::ffff:127.0.0.1")).toBe("127.0.0.1");
    expect(addressKey("203.0.113.9")).toBe("203.0.113.9");
    expect(addressKey("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:0DB8:0001:0002:ffff:1:2:3")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
    const a = new HandshakeAdmission(limits);
    for (let i = 0; i < 3; i++) a.failed(`2001:db8:1:2::${i + 1}`);
    expect(a.throttled("2001:db8:1:2:aaaa::9")).toBe(true);
    expect(a.throttled("2001:db8:1:3::1")).toBe(false);
  });
});
