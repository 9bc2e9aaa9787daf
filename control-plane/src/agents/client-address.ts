import type { IncomingMessage } from "node:http";

/**
 * The source address of a socket.io handshake, by the rule the HTTP layer applies to requests
 * (`trust proxy`, PLATFORM_TRUST_PROXY): without it the TCP peer; with it the client address
 * that X-Forwarded-For names first, as Express's req.ip does when every proxy is trusted
 * (client-address.test.ts holds the two side by side).
 */
export function clientAddress(req: IncomingMessage, trustProxy: boolean): string {
  const peer = req.socket?.remoteAddress ?? "";
  if (!trustProxy) return peer;
  const header = req.headers["x-forwarded-for"];
  const raw = Array.isArray(header) ? header.join(",") : (header ?? "");
  const first = raw
    .split(",")
    .map((s) => s.trim())
    .find((s) => s !== "");
  return first ?? peer;
}
