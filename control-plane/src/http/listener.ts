import { createServer, type RequestListener, type Server } from "node:http";

/**
 * The HTTP server every listener of the control plane uses (the real one, and the test
 * harnesses). An idle keep-alive connection outlives a client's pause and a load balancer's
 * idle timeout (often 60 s): with Node's default of 5 s, a client reusing a pooled socket just
 * as the server closes it gets ECONNRESET. The header timeout stays above the keep-alive one, so
 * a connection idle between requests is never cut as a slow request.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

export function createHttpServer(listener: RequestListener): Server {
  const server = createServer(listener);
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
  return server;
}
