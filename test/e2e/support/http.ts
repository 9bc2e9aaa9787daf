import http from "node:http";
import https from "node:https";
import { sh } from "./kit.js";

export interface HttpAnswer {
  status: number;
  body: string;
}

/**
 * One GET from the test process (loopback or a test host), bounded by `timeoutMs` of inactivity.
 * `servername`: over HTTPS with that SNI, any certificate accepted (a test proxy's own CA).
 * Each GET opens its own connection: Node's global agent keeps sockets alive, and a proxy that
 * reloads its config (every stop, start and delete of an app) closes its idle keep-alive
 * connections, so a probe reusing one just then got "socket hang up" instead of an answer.
 */
export function httpGet(target: { host: string; port: number; path?: string; headers?: Record<string, string>; timeoutMs?: number; servername?: string }): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const options = { host: target.host, port: target.port, path: target.path ?? "/", headers: target.headers ?? {}, timeout: target.timeoutMs ?? 5_000, agent: false };
    const get = (callback: (res: http.IncomingMessage) => void) =>
      target.servername !== undefined ? https.get({ ...options, servername: target.servername, rejectUnauthorized: false }, callback) : http.get(options, callback);
    const req = get((res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", reject);
  });
}

/** A GET through a proxy's published port with a Host header. */
export const viaProxyAt = (host: string, port: number, hostHeader: string, path = "/"): Promise<HttpAnswer> =>
  httpGet({ host, port, path, headers: { Host: hostHeader } });

/**
 * One HTTP GET from inside a container with its busybox wget, bounded to 3 s (`timeout`; busybox
 * wget's own -T crashes the static build): the body, or null when the target cannot be resolved,
 * connected to or did not answer 2xx.
 */
export async function fetchFrom(container: string, target: string, port = 8080, hostHeader?: string): Promise<string | null> {
  const url = `http://${target}:${port}/`;
  const args = hostHeader
    ? ["exec", container, "sh", "-c", 'timeout 3 wget -q -O- --header "Host: $1" "$0"; echo "exit=$?"', url, hostHeader]
    : ["exec", container, "sh", "-c", 'timeout 3 wget -q -O- "$0"; echo "exit=$?"', url];
  const out = await sh("docker", args, { timeoutMs: 15_000 });
  const m = /exit=(\d+)$/.exec(out);
  return m && m[1] === "0" ? out.slice(0, m.index).trim() : null;
}
