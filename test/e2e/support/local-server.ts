import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import type { ChildProcess } from "node:child_process";
import { freePort, startTestInstance, type ApiClient, type TeamFixture, type TestInstance } from "../../api/harness.js";
import { KeyFactory } from "../../api/support/ssh.js";
import { sh, until } from "./kit.js";
import { spawnLocalAgent, stopLocalAgent } from "./local-agent.js";

/**
 * The pieces the suites that drive this machine's engine through a local agent share: the
 * greeting image, the server record for this machine, and application creates by path.
 */

/** Builds `tag` from a Dockerfile of these lines (no context files), labelled for the e2e cleanup. */
export async function buildImage(tag: string, dockerfile: string[]): Promise<void> {
  const ctx = await mkdtemp(join(tmpdir(), "capstan-e2e-image-"));
  try {
    await writeFile(join(ctx, "Dockerfile"), `${dockerfile.join("\n")}\n`);
    await sh("docker", ["build", "-q", "--label", "capstan.test=1", "-t", tag, ctx]);
  } finally {
    await rm(ctx, { recursive: true, force: true });
  }
}

/** An image app: prints its greeting from the environment, serves it on 8080. */
export function buildHelloImage(tag: string): Promise<void> {
  return buildImage(tag, ["FROM capstan-test/busybox:latest", "RUN mkdir -p /www", 'CMD ["sh", "-c", "echo \\"hello $GREETING\\" > /www/index.html; exec httpd -f -p 8080 -h /www"]']);
}

export interface LocalServer {
  server: { uuid: string; destination: string };
  agentToken: string;
  /** The agent's state directory (removed by the suite's afterAll). */
  stateDir: string;
}

/**
 * This machine as a server of the team, at 127.0.0.1 (the instance needs
 * PLATFORM_ALLOW_PRIVATE_ENDPOINTS: loopback addresses are refused otherwise).
 */
export async function registerLocalServer(team: TeamFixture, keys: KeyFactory, statePrefix = "capstan-e2e-agent-"): Promise<LocalServer> {
  const key = await keys.generate("ed25519");
  const keyUuid = (await team.api.post("/security/keys", { name: "local", private_key: key.privateKey })).body.uuid;
  const created = await team.api.post("/servers", { name: "this-machine", ip: "127.0.0.1", private_key_uuid: keyUuid });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const stateDir = await mkdtemp(join(tmpdir(), statePrefix));
  const detail = (await team.api.get(`/servers/${created.body.uuid}`)).body;
  return { server: { uuid: created.body.uuid, destination: detail.destinations[0].uuid }, agentToken: created.body.agent_token, stateDir };
}

/** Application creates in one project on one server: the placement fields, and POST /applications/{path} answering its uuid. */
export function applicationCreator(api: () => ApiClient, placement: () => { project: string; server: { uuid: string; destination: string } }) {
  const common = (name: string, extra: Record<string, unknown> = {}) => {
    const { project, server } = placement();
    return { project_uuid: project, environment_name: "production", server_uuid: server.uuid, destination_uuid: server.destination, name, ...extra };
  };
  const create = async (path: string, body: Record<string, unknown>): Promise<string> => {
    const res = await api().post(`/applications/${path}`, body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.uuid as string;
  };
  return { common, create };
}

/**
 * The settings of a control plane whose server is this machine with its own proxy: the public
 * URL, the loopback opt-out (the server is at 127.0.0.1), the proxy's image, name and ports.
 */
export function localProxyInstanceEnv(o: { port: number; proxyName: string; proxyPort: number; httpsPort: number; deployTimeoutS: number }): Record<string, string> {
  return {
    PLATFORM_PUBLIC_URL: `http://127.0.0.1:${o.port}`,
    PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true",
    PLATFORM_PROXY_IMAGE: "capstan/proxy:latest",
    PLATFORM_PROXY_NAME: o.proxyName,
    PLATFORM_PROXY_HTTP_PORT: String(o.proxyPort),
    PLATFORM_PROXY_HTTPS_PORT: String(o.httpsPort),
    PLATFORM_DEPLOY_TIMEOUT_S: String(o.deployTimeoutS),
  };
}

/** Waits for a deployment to end (finished, failed or cancelled) and answers its detail. */
export function deploymentEnd(api: ApiClient, uuid: string, timeoutMs: number): Promise<Record<string, any>> {
  return until(
    `deployment ${uuid} to end`,
    async () => {
      const d = (await api.get(`/deployments/${uuid}`)).body;
      return ["finished", "failed", "cancelled"].includes(d.status) ? d : false;
    },
    timeoutMs,
    500,
  );
}

/** Deploys an application and expects the deployment to finish (its log's tail in the failure message). */
export async function deployFinished(api: ApiClient, app: string, timeoutMs: number, logTail = 3000): Promise<Record<string, any>> {
  const res = await api.post(`/applications/${app}/deploy`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const d = await deploymentEnd(api, res.body.deployment_uuid as string, timeoutMs);
  expect(d.status, `deployment failed: ${d.reason ?? ""}\n${String(d.logs).slice(-logTail)}`).toBe("finished");
  return d;
}

/** A control plane with its own proxy on this machine, one team, this machine as its server with a connected local agent, and a project. */
export interface LocalStack {
  t: TestInstance;
  team: TeamFixture;
  server: { uuid: string; destination: string };
  project: string;
  proxyPort: number;
  /** The proxy's published HTTPS port (w7/svcroute). */
  httpsPort: number;
  /** The local agent's state directory (its stored compose files are under compose/<uuid>/). */
  stateDir: string;
  close(): Promise<void>;
}

export async function startLocalStack(o: { name: string; deployTimeoutS: number; env?: Record<string, string>; agentLabels?: string; agentEnv?: Record<string, string> }): Promise<LocalStack> {
  const proxyName = `capstan-proxy-e2e-${o.name}`;
  const keys = new KeyFactory();
  const proxyPort = await freePort();
  const httpsPort = await freePort();
  const port = await freePort();
  const t = await startTestInstance({ ...localProxyInstanceEnv({ port, proxyName, proxyPort, httpsPort, deployTimeoutS: o.deployTimeoutS }), ...o.env }, { host: "127.0.0.1", port });
  let agent: ChildProcess | null = null;
  let stateDir = "";
  const close = async () => {
    await stopLocalAgent(agent, "SIGTERM").catch(() => {});
    agent = null;
    await t.close();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
    await sh("docker", ["rm", "-f", proxyName]).catch(() => {});
    await sh("docker", ["volume", "rm", "-f", `${proxyName}-data`]).catch(() => {});
    keys.cleanup();
  };
  try {
    const team = await t.newTeam();
    const local = await registerLocalServer(team, keys, `capstan-e2e-${o.name}-`);
    stateDir = local.stateDir;
    agent = spawnLocalAgent({ url: `http://127.0.0.1:${port}`, token: local.agentToken, stateDir, ...(o.agentLabels ? { labels: o.agentLabels } : {}), ...(o.agentEnv ? { env: o.agentEnv } : {}) });
    await until("the agent to connect", async () => (await team.api.get(`/servers/${local.server.uuid}`)).body.status === "reachable", 60_000);
    const project = (await team.api.post("/projects", { name: `e2e-${o.name}` })).body.uuid as string;
    return { t, team, server: local.server, project, proxyPort, httpsPort, stateDir, close };
  } catch (err) {
    await close();
    throw err;
  }
}
