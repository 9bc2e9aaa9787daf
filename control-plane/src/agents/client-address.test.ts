import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientAddress } from "./client-address.js";

/**
 * The handshake's source address must follow the HTTP layer's rule: an Express app with the
 * same `trust proxy` setting answers req.ip for the same request, and both must agree.
 */
for (const trust of [false, true]) {
  describe(`clientAddress with trust proxy ${trust}`, () => {
    let url = "";
    let server: ReturnType<typeof createServer>;
    beforeAll(async () => {
      const app = express();
      app.set("trust proxy", trust);
      app.get("/", (req, res) => res.json({ express: req.ip, ours: clientAddress(req as unknown as IncomingMessage, trust) }));
      server = createServer(app);
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    });
    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    const cases: (string | undefined)[] = [undefined, "203.0.113.5", "203.0.113.5, 10.0.0.1", " 198.51.100.2 ,10.0.0.2, 10.0.0.3", "2001:db8::7", ""];
    for (const xff of cases) {
      it(`agrees with Express's req.ip for X-Forwarded-For ${JSON.stringify(xff)}`, async () => {
        const res = await fetch(url, { headers: xff === undefined ? {} : { "X-Forwarded-For": xff } });
        const body = (await res.json()) as { express: string; ours: string };
        expect(body.ours).toBe(body.express);
        if (!trust) expect(body.ours).toMatch(/127\.0\.0\.1$/);
      });
    }
  });
}
