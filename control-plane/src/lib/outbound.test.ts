import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboundFetch } from "./outbound.js";

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
