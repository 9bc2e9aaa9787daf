import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isForbiddenAddress, outboundFetch } from "./outbound.js";

describe("isForbiddenAddress", () => {
  it("refuses loopback, link-local, metadata and unspecified addresses in both families", () => {
    for (const a of ["127.0.0.1", "127.1.2.3", "0.0.0.0", "169.254.169.254", "169.254.1.1", "100.100.100.200", "::1", "::", "fe80::1", "fd00:ec2::254", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "not-an-ip"]) {
      expect(isForbiddenAddress(a), a).toBe(true);
    }
  });

  it("allows public and private-network addresses (self-hosted endpoints live there)", () => {
    for (const a of ["140.82.112.3", "10.0.0.5", "192.168.1.10", "172.16.0.1", "2606:50c0:8000::153", "fd12:3456::1"]) {
      expect(isForbiddenAddress(a), a).toBe(false);
    }
  });
});

describe("outboundFetch", () => {
  let server: http.Server;
  let port = 0;
  let hits = 0;
  beforeAll(async () => {
    server = http.createServer((_req, res) => {
      hits++;
      res.end("secret of the control plane's own network");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("never connects to a loopback address, given literally or by a name", async () => {
    const guarded = outboundFetch({ allowPrivate: false });
    await expect(guarded(`http://127.0.0.1:${port}/`)).rejects.toThrow(/loopback, link-local or metadata/);
    await expect(guarded(`http://[::ffff:127.0.0.1]:${port}/`)).rejects.toThrow(/loopback, link-local or metadata/);
    const byName = await guarded(`http://localhost:${port}/`).then(
      () => null,
      (err: Error) => err,
    );
    expect(byName).toBeInstanceOf(Error);
    expect(String((byName!.cause as Error | undefined)?.message ?? byName!.message)).toMatch(/resolves to .* refused/);
    expect(hits).toBe(0);
  });

  it("connects anywhere when the instance allows private endpoints", async () => {
    const open = outboundFetch({ allowPrivate: true });
    const res = await open(`http://127.0.0.1:${port}/`);
    expect(res.status).toBe(200);
    expect(hits).toBe(1);
  });
});
