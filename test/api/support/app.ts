import { createHttpServer } from "../../../control-plane/src/http/listener.js";
import type { AddressInfo } from "node:net";
import { pino, type Logger } from "pino";
import { createApp } from "../../../control-plane/src/http/app.js";
import type { AnyRoute } from "../../../control-plane/src/http/route.js";
import { client, type ApiClient, type TestInstance } from "../harness.js";

/**
 * The control plane's HTTP app with a test-only route table, on the instance's services and
 * database (tokens, teams and features of the instance apply), listening on loopback.
 */
export async function serveRoutes(
  t: TestInstance,
  routes: AnyRoute[],
  opts: { log?: Logger } = {},
): Promise<{ url: string; api(token?: string): ApiClient; close(): Promise<void> }> {
  const app = createApp({
    services: t.instance.services,
    log: opts.log ?? pino({ level: "silent" }),
    rateLimit: (_req, _res, next) => next(),
    maxBodyBytes: t.config.maxBodyBytes,
    trustProxy: false,
    ready: async () => {},
    routes,
    responseCacheBytes: 0,
  });
  // The real server's keep-alive (the route fuzz reuses pooled sockets across slow fixture rounds).
  const server = createHttpServer(app);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    api: (token?: string) => client(`${url}/api/v1`, token),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
