/**
 * Issue 15, by traffic on a real engine: deleting an application always stops and removes its
 * containers and its proxy routes; delete_configurations=false only keeps the configuration
 * files the agent stored for it on the server (a compose application's file). Before the fix,
 * DELETE ?delete_configurations=false left the containers running and routed.
 * Also the proxy as GET /servers/{uuid} shows it, reported by the real agent from the real
 * proxy container.
 *
 * The agent runs as a process on this machine (local-agent mode); everything it creates
 * carries capstan.test=1 (CAPSTAN_AGENT_LABELS).
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { access, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, startTestInstance, type TeamFixture, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { sh, until } from "./support/kit.js";
import { viaProxyAt } from "./support/http.js";
import { spawnLocalAgent, stopLocalAgent } from "./support/local-agent.js";
import { applicationCreator, buildHelloImage, deployFinished, localProxyInstanceEnv, registerLocalServer } from "./support/local-server.js";

const RUN = randomBytes(3).toString("hex");
const PROXY_NAME = `capstan-proxy-del-${RUN}`;
const decoy = `capstan-proxy-decoy-${RUN}`;
const HELLO_IMAGE = "capstan-test/e2e-hello:latest";
const DEPLOY_TIMEOUT_S = 180;

let t: TestInstance;
let team: TeamFixture;
let agent: ChildProcess | null = null;
let agentOpts: Parameters<typeof spawnLocalAgent>[0];
let stateDir = "";
let proxyPort = 0;
let server: { uuid: string; destination: string };
let project: string;
const keys = new KeyFactory();

const viaProxy = (host: string) => viaProxyAt("127.0.0.1", proxyPort, host);

async function answers(host: string, expected: string): Promise<void> {
  await until(`${host} to answer "${expected}" through the proxy`, async () => {
    const r = await viaProxy(host).catch(() => ({ status: 0, body: "" }));
    return r.status === 200 && r.body.includes(expected);
  }, 60_000, 250);
}

async function stopsAnswering(host: string): Promise<void> {
  await until(`${host} to stop answering through the proxy`, async () => (await viaProxy(host).catch(() => ({ status: 0 }))).status !== 200, 60_000, 250);
}

const containersOf = async (app: string) =>
  (await sh("docker", ["ps", "-a", "--filter", `label=capstan.resource.uuid=${app}`, "--format", "{{.Names}} {{.State}}"])).split("\n").filter(Boolean);

const { common, create } = applicationCreator(() => team.api, () => ({ project, server }));

async function deployed(app: string, greeting: string): Promise<void> {
  const env = await team.api.patch(`/applications/${app}/envs/bulk`, { variables: [{ key: "GREETING", value: greeting }] });
  expect(env.status, JSON.stringify(env.body)).toBe(200);
  await deployFinished(team.api, app, DEPLOY_TIMEOUT_S * 1000);
}

const exists = (path: string) => access(path).then(() => true, () => false);

beforeAll(async () => {
  await buildHelloImage(HELLO_IMAGE);
  proxyPort = await freePort();
  const httpsPort = await freePort();
  const port = await freePort();
  t = await startTestInstance(
    {
      // The server is this machine, added at 127.0.0.1: loopback addresses need the opt-out (docs/configuration.md).
      ...localProxyInstanceEnv({ port, proxyName: PROXY_NAME, proxyPort, httpsPort, deployTimeoutS: DEPLOY_TIMEOUT_S }),
    },
    { host: "127.0.0.1", port },
  );
  team = await t.newTeam();
  const local = await registerLocalServer(team, keys);
  ({ server, stateDir } = local);
  agentOpts = { url: `http://127.0.0.1:${port}`, token: local.agentToken, stateDir };
  agent = spawnLocalAgent(agentOpts);
  await until("the agent to connect", async () => (await team.api.get(`/servers/${server.uuid}`)).body.status === "reachable", 60_000);
  project = (await team.api.post("/projects", { name: `e2e-del-${RUN}` })).body.uuid;
}, 600_000);

afterAll(async () => {
  await stopLocalAgent(agent).catch(() => {});
  await t?.close();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
  await sh("docker", ["rm", "-f", PROXY_NAME, decoy]).catch(() => {});
  await sh("docker", ["volume", "rm", "-f", `${PROXY_NAME}-data`]).catch(() => {});
  keys.cleanup();
});

describe("deleting an application stops its traffic, whatever delete_configurations says", () => {
  it("delete_configurations=false: the domain stops answering through the proxy and the containers are gone; another app keeps serving", async () => {
    const host = `kept-config-${RUN}.e2e.test`;
    const otherHost = `neighbour-${RUN}.e2e.test`;
    const app = await create("dockerimage", common("kept-config", { docker_registry_image_name: HELLO_IMAGE, ports_exposes: "8080", fqdn: `http://${host}` }));
    const other = await create("dockerimage", common("neighbour", { docker_registry_image_name: HELLO_IMAGE, ports_exposes: "8080", fqdn: `http://${otherHost}` }));
    await deployed(app, "doomed");
    await deployed(other, "neighbour");
    await answers(host, "hello doomed");
    await answers(otherHost, "hello neighbour");

    const del = await team.api.delete(`/applications/${app}?delete_configurations=false`);
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    await stopsAnswering(host);
    await until(`the containers of ${app} to be removed`, async () => (await containersOf(app)).length === 0, 60_000, 500);
    await answers(otherHost, "hello neighbour");
  });

  it("a compose application: delete_configurations=false keeps its stored file on the server, the default removes it; both stop serving", async () => {
    const compose = [
      "services:",
      "  web:",
      "    image: capstan-test/busybox:latest",
      "    command: [\"sh\", \"-c\", \"mkdir -p /www && echo \\\"compose $${GREETING}\\\" > /www/index.html; exec httpd -f -p 8080 -h /www\"]",
      "    environment:",
      "      GREETING: ${GREETING}",
      "x-capstan-public-service: web",
    ].join("\n");
    const keptHost = `compose-kept-${RUN}.e2e.test`;
    const goneHost = `compose-gone-${RUN}.e2e.test`;
    const kept = await create("dockercompose", common("compose-kept", { docker_compose_raw: compose, ports_exposes: "8080", fqdn: `http://${keptHost}` }));
    const gone = await create("dockercompose", common("compose-gone", { docker_compose_raw: compose, ports_exposes: "8080", fqdn: `http://${goneHost}` }));
    await deployed(kept, "kept");
    await deployed(gone, "gone");
    await answers(keptHost, "compose kept");
    await answers(goneHost, "compose gone");
    const fileOf = (uuid: string) => join(stateDir, "compose", uuid, "docker-compose.yml");
    expect(await exists(fileOf(kept))).toBe(true);
    expect(await exists(fileOf(gone))).toBe(true);

    expect((await team.api.delete(`/applications/${kept}`, { delete_configurations: false })).status).toBe(200);
    expect((await team.api.delete(`/applications/${gone}`)).status).toBe(200);
    await stopsAnswering(keptHost);
    await stopsAnswering(goneHost);
    await until("both compose projects' containers to be removed", async () => (await containersOf(kept)).length + (await containersOf(gone)).length === 0, 60_000, 500);
    await until("the default delete to remove the stored file", async () => !(await exists(fileOf(gone))), 30_000, 250);
    expect(await exists(fileOf(kept))).toBe(true);
  });
});

describe("the proxy in GET /servers/{uuid}", () => {
  it("shows the real proxy container reported by the agent: running, its image, Caddy's version", async () => {
    // Another container labelled as the platform's proxy on the same engine (other files' proxies
    // are there too, at times): the restarted agent must still report the proxy it synced last
    // (its state directory keeps the name), not guess among them.
    await sh("docker", ["create", "--name", decoy, "--label", "capstan.test=1", "--label", "capstan.managed=true", "--label", "capstan.component=proxy", HELLO_IMAGE]);
    // The agent reports on connect: restart it to have a report now rather than within a minute.
    await stopLocalAgent(agent);
    agent = spawnLocalAgent(agentOpts);
    const proxy = await until(
      "the agent's proxy report",
      async () => {
        const body = (await team.api.get(`/servers/${server.uuid}`)).body;
        if (body.status === "reachable" && body.proxy?.status === "running") return body.proxy;
        throw new Error(`server ${body.status}, proxy ${JSON.stringify(body.proxy)}`); // what the timeout reports
      },
      60_000,
      250,
    );
    const caddy = (await sh("docker", ["exec", PROXY_NAME, "caddy", "version"])).trim().split(/\s+/)[0];
    expect(proxy, JSON.stringify(proxy)).toMatchObject({ kind: "caddy", name: PROXY_NAME, image: "capstan/proxy:latest", status: "running", version: caddy, isolation: { enabled: false, phase: "none" } });
    expect(proxy.reported_at).toEqual(expect.any(String));
    await sh("docker", ["rm", "-f", decoy]);
  });
});
