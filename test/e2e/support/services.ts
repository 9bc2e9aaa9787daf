import { expect } from "vitest";
import type { ApiClient } from "../../api/harness.js";
import { httpGet, type HttpAnswer } from "./http.js";
import { sh, until } from "./kit.js";
import type { LocalStack } from "./local-server.js";

/**
 * What the service suites on the real engine share (test/e2e/services*.test.ts): the service's
 * containers as the engine has them, start/restart/stop through the API until the status
 * follows, and GETs through the stack's proxy by Host header.
 */

export interface ServiceContainer {
  name: string;
  state: string;
  id: string;
  env: string[];
}

/** The service's containers on the engine (by its capstan.resource.uuid label), sorted by name. */
export async function serviceContainers(uuid: string): Promise<ServiceContainer[]> {
  const ids = (await sh("docker", ["ps", "-aq", "--filter", `label=capstan.resource.uuid=${uuid}`])).split("\n").filter(Boolean);
  if (!ids.length) return [];
  const inspected = JSON.parse(await sh("docker", ["inspect", ...ids])) as { Id: string; Name: string; State: { Status: string }; Config: { Env: string[] } }[];
  return inspected.map((c) => ({ id: c.Id, name: c.Name.replace(/^\//, ""), state: c.State.Status, env: c.Config.Env })).sort((a, b) => a.name.localeCompare(b.name));
}

/** One variable of a container's environment (undefined when unset). */
export const envOf = (c: { env: string[] }, key: string) => c.env.find((e) => e.startsWith(`${key}=`))?.slice(key.length + 1);

/** Start/restart/stop answer 200 when the agent finished within the wait, else 202: then the status is polled until it matches `want`. */
export async function serviceAction(api: ApiClient, uuid: string, action: "start" | "restart" | "stop", want: RegExp, timeoutMs: number): Promise<void> {
  const res = await api.post(`/services/${uuid}/${action}`);
  expect([200, 202], `${action}: ${JSON.stringify(res.body)}`).toContain(res.status);
  await until(`the service to be ${want} after ${action}`, async () => want.test((await api.get(`/services/${uuid}`)).body.status), timeoutMs, 250);
}

/** The service's containers, volumes and networks on the engine, by its label. */
export async function serviceLeftovers(uuid: string): Promise<{ containers: string[]; volumes: string[]; networks: string[] }> {
  const list = async (...argv: string[]) => (await sh("docker", [...argv, "--filter", `label=capstan.resource.uuid=${uuid}`])).split("\n").filter(Boolean);
  return { containers: await list("ps", "-aq"), volumes: await list("volume", "ls", "-q"), networks: await list("network", "ls", "-q") };
}

/** GETs through the stack's proxy on loopback with a Host header (and SNI over HTTPS; the certificate is the proxy's own CA's): no DNS involved. */
export function proxyClient(stack: () => LocalStack, timeoutMs: number) {
  const get = (host: string, opts: { secure?: boolean; auth?: string } = {}): Promise<HttpAnswer> => {
    const headers: Record<string, string> = { Host: host };
    if (opts.auth) headers.Authorization = `Basic ${Buffer.from(opts.auth).toString("base64")}`;
    const s = stack();
    return httpGet({ host: "127.0.0.1", port: opts.secure ? s.httpsPort : s.proxyPort, headers, timeoutMs: 15_000, ...(opts.secure ? { servername: host } : {}) });
  };
  /** Polls until `host` answers `status` (and `body` when given); errors while the proxy reloads count as not yet. */
  const answers = (host: string, status: number, opts: { secure?: boolean; auth?: string; body?: string } = {}): Promise<HttpAnswer> =>
    until(
      `${host} to answer ${status}${opts.body ? ` ${opts.body}` : ""}`,
      async () => {
        const r = await get(host, opts).catch(() => null);
        return r && r.status === status && (opts.body === undefined || r.body.trim() === opts.body) ? r : false;
      },
      timeoutMs,
      500,
    );
  return { get, answers };
}
