import net from "node:net";
import { describe, expect, it } from "vitest";
import { assertHostAllowed, classifyAddress, ForbiddenEndpointError, guardedLookup, isRefusedAddress } from "./address-guard.js";

describe("classifyAddress", () => {
  it("names each special range, in both families and in IPv4-embedding IPv6 forms", () => {
    const cases: [string, string][] = [
      ["127.0.0.1", "loopback"],
      ["127.9.9.9", "loopback"],
      ["::1", "loopback"],
      ["::ffff:127.0.0.1", "loopback"],
      ["::ffff:7f00:1", "loopback"], // the same, hex-written
      ["64:ff9b::7f00:1", "loopback"], // NAT64
      ["2002:7f00:1::", "loopback"], // 6to4
      ["0.0.0.0", "unspecified"],
      ["::", "unspecified"],
      ["169.254.169.254", "metadata"],
      ["::ffff:169.254.169.254", "metadata"],
      ["100.100.100.200", "metadata"],
      ["fd00:ec2::254", "metadata"],
      ["169.254.1.1", "link-local"],
      ["fe80::1", "link-local"],
      ["fe80::1%eth0", "link-local"],
      ["10.1.2.3", "private"],
      ["172.16.0.1", "private"],
      ["172.31.255.255", "private"],
      ["192.168.1.10", "private"],
      ["fd12:3456::1", "unique-local"],
      ["fc00::1", "unique-local"],
      ["100.64.0.1", "cgnat"],
      ["100.127.255.254", "cgnat"],
      ["224.0.0.1", "multicast"],
      ["ff02::1", "multicast"],
      ["255.255.255.255", "reserved"],
      ["240.0.0.1", "reserved"],
      ["140.82.112.3", "public"],
      ["172.32.0.1", "public"],
      ["100.128.0.1", "public"],
      ["2606:50c0:8000::153", "public"],
      ["not-an-ip", "invalid"],
      ["", "invalid"],
      ["1.2.3", "invalid"],
    ];
    for (const [address, cls] of cases) expect(classifyAddress(address), address).toBe(cls);
  });
});

describe("isRefusedAddress", () => {
  it("refuses loopback, link-local, metadata, unspecified and multicast addresses in both families", () => {
    for (const a of [
      "127.0.0.1",
      "127.1.2.3",
      "0.0.0.0",
      "169.254.169.254",
      "169.254.1.1",
      "100.100.100.200",
      "::1",
      "::",
      "fe80::1",
      "fd00:ec2::254",
      "::ffff:127.0.0.1",
      "::ffff:169.254.169.254",
      "ff02::1",
      "not-an-ip",
    ]) {
      expect(isRefusedAddress(a), a).toBe(true);
    }
  });

  it("keeps public and private-network addresses reachable (self-hosted git and S3 servers live there)", () => {
    for (const a of ["8.8.8.8", "140.82.112.3", "10.0.0.5", "172.16.0.1", "172.20.0.1", "192.168.1.10", "100.64.1.1", "::ffff:10.0.0.1", "fd12:3456::1", "2606:50c0:8000::153"]) {
      expect(isRefusedAddress(a), a).toBe(false);
    }
  });
});

describe("assertHostAllowed", () => {
  it("throws for refused literal addresses (bracketed IPv6 too) and lets names through to the lookup", () => {
    expect(() => assertHostAllowed("127.0.0.1", "SETTING")).toThrow(ForbiddenEndpointError);
    expect(() => assertHostAllowed("[::1]", "SETTING")).toThrow(/loopback address; loopback, link-local or metadata addresses are refused \(SETTING allows them\)/);
    expect(() => assertHostAllowed("169.254.169.254", "SETTING")).toThrow(/metadata address/);
    expect(() => assertHostAllowed("10.0.0.1", "SETTING")).not.toThrow();
    expect(() => assertHostAllowed("[fd12::1]", "SETTING")).not.toThrow();
    expect(() => assertHostAllowed("example.invalid", "SETTING")).not.toThrow();
  });
});

describe("guardedLookup", () => {
  it("fails a socket connect to a name that resolves to a refused address, before any byte is sent", async () => {
    let accepted = 0;
    const server = net.createServer((s) => {
      accepted++;
      s.destroy();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const err = await new Promise<Error | null>((resolve) => {
        const sock = net.connect({ host: "localhost", port, lookup: guardedLookup("SETTING") as never });
        sock.once("connect", () => {
          sock.destroy();
          resolve(null);
        });
        sock.once("error", resolve);
      });
      expect(err).toBeInstanceOf(ForbiddenEndpointError);
      expect(err!.message).toMatch(/^localhost resolves to .* loopback address; .* refused \(SETTING allows them\)$/);
      expect(accepted).toBe(0);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("answers like dns.lookup for allowed names, with or without all", async () => {
    // A private address passes; dns.lookup answers a literal without a DNS server.
    const lookup = guardedLookup("SETTING");
    const all = await new Promise<unknown>((resolve, reject) =>
      lookup("10.0.0.7", { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
    );
    expect(all).toEqual([{ address: "10.0.0.7", family: 4 }]);
    const one = await new Promise<unknown[]>((resolve, reject) =>
      lookup("10.0.0.7", {}, (err, address, family) => (err ? reject(err) : resolve([address, family]))),
    );
    expect(one).toEqual(["10.0.0.7", 4]);
  });
});
