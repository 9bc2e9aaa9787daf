/**
 * Build servers end to end (docs/deployments.md): two test hosts, each a real Docker Engine with
 * the real agent started by the join command; host 1 is the team's build server, host 2 runs
 * the application. A real registry (Debian's docker-registry 2.8, htpasswd logins) sits on the
 * hosts' network. A Dockerfile application of host 2 is built on host 1, pushed, pulled by
 * host 2 and served through host 2's proxy. Host 2 never gets the base image, so it could not
 * have built it. A registry password the instance does not know fails the next deployment
 * with the registry's reason.
 */
import { randomBytes } from "node:crypto";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, startTestInstance, type TeamFixture, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { AGENT_IMAGE, INSECURE_REGISTRIES, gatewayOf, htpasswdLine, loadImages, onHost, repo, sh, startHosts, startPrivateRegistry, stopHosts, until, type TestHost } from "./support/kit.js";
import { deploymentEnd } from "./support/local-server.js";
import { httpGet, viaProxyAt } from "./support/http.js";

const PREFIX = "capbuildsrv";
const BUSYBOX = "capstan-test/busybox:latest";
const REGISTRY_NAME = `${PREFIX}-registry`;
const REGISTRY_USER = "capstan-push";
const REGISTRY_PASSWORD = randomBytes(12).toString("hex");
const PROXY_HTTP_PORT = 8081;
const DOMAIN = "built.e2e.test";
// Inner engines talk plain HTTP to the test registry (on the hosts' network): a private range only.

let t: TestInstance;
let team: TeamFixture;
let hosts: TestHost[];
let registryIp = "";
let authDir = "";
let project = "";
const keys = new KeyFactory();
const servers: { uuid: string; id: number; destination: string; host: TestHost }[] = [];

async function registryAnswers(): Promise<void> {
  await until(
    "the registry to answer",
    async () => (await httpGet({ host: registryIp, port: 5000, path: "/v2/", timeoutMs: 2000 }).catch(() => null))?.status === 401,
    30_000,
    250,
  );
}

/** GET on the registry's API with the login (what the engines do). */
const registryGet = (path: string) =>
  httpGet({ host: registryIp, port: 5000, path, headers: { Authorization: `Basic ${Buffer.from(`${REGISTRY_USER}:${REGISTRY_PASSWORD}`).toString("base64")}` } });

const viaProxy = (host: TestHost, hostHeader: string) => viaProxyAt(host.ip, PROXY_HTTP_PORT, hostHeader);

const settled = (uuid: string) => deploymentEnd(team.api, uuid, 150_000);

async function deploy(app: string): Promise<string> {
  const res = await team.api.post(`/applications/${app}/deploy`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.deployment_uuid as string;
}

beforeAll(async () => {
  await sh("bash", [join(repo, "test/kit/images.sh"), "registry"]);
  hosts = await startHosts(2, PREFIX, { dockerdArgs: INSECURE_REGISTRIES });
  const [builderHost, appHost] = hosts as [TestHost, TestHost];

  let registryHost: string;
  ({ host: registryHost, authDir } = await startPrivateRegistry(PREFIX, REGISTRY_NAME, REGISTRY_USER, REGISTRY_PASSWORD));
  registryIp = registryHost.replace(/:5000$/, "");
  await registryAnswers();

  // The base image only on the build server; the proxy only where the application runs.
  await Promise.all([loadImages(builderHost.name, AGENT_IMAGE, BUSYBOX), loadImages(appHost.name, AGENT_IMAGE, "capstan/proxy:latest")]);

  const gw = await gatewayOf(`${PREFIX}-net`);
  const port = await freePort();
  t = await startTestInstance(
    {
      PLATFORM_PUBLIC_URL: `http://${gw}:${port}`,
      PLATFORM_BUILD_REGISTRY: `${registryIp}:5000/capstan`,
      PLATFORM_BUILD_REGISTRY_USERNAME: REGISTRY_USER,
      PLATFORM_BUILD_REGISTRY_PASSWORD: REGISTRY_PASSWORD,
      PLATFORM_PROXY_HTTP_PORT: String(PROXY_HTTP_PORT),
      PLATFORM_PROXY_HTTPS_PORT: "8443",
    },
    { host: "0.0.0.0", port },
  );
  team = await t.newTeam();
  const key = await keys.generate("ed25519");
  const keyUuid = (await team.api.post("/security/keys", { name: "hosts", private_key: key.privateKey })).body.uuid;
  for (const [i, host] of hosts.entries()) {
    const created = await team.api.post("/servers", { name: host.name, ip: host.ip, private_key_uuid: keyUuid, is_build_server: i === 0 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await onHost(host.name, "sh", "-c", created.body.join_command);
    const detail = (await team.api.get(`/servers/${created.body.uuid}`)).body;
    const row = await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: created.body.uuid } });
    servers.push({ uuid: created.body.uuid, id: row.id, destination: detail.destinations[0].uuid, host });
  }
  for (const s of servers) {
    await until(`${s.host.name} reachable`, async () => (await team.api.get(`/servers/${s.uuid}`)).body.status === "reachable", 60_000);
    await until(`network capstan on ${s.host.name}`, async () => (await onHost(s.host.name, "docker", "network", "ls", "-q", "--filter", "name=^capstan$")).length > 0, 30_000);
  }
  project = (await team.api.post("/projects", { name: "build-servers" })).body.uuid;
});

afterAll(async () => {
  await t?.close();
  await stopHosts(PREFIX).catch(() => {});
  if (authDir) await rm(authDir, { recursive: true, force: true });
  keys.cleanup();
});

describe("a build server builds, the registry carries the image, the application's server runs it", () => {
  let app = "";

  it("deploys a Dockerfile application of host 2 built on host 1", async () => {
    const [builderSrv, appSrv] = servers as [(typeof servers)[0], (typeof servers)[0]];
    const dockerfile = [
      `FROM ${BUSYBOX}`,
      'RUN mkdir -p /www && echo "built on the build server" > /www/index.html',
      'CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]',
    ].join("\n");
    const created = await team.api.post("/applications/dockerfile", {
      project_uuid: project,
      environment_name: "production",
      server_uuid: appSrv.uuid,
      destination_uuid: appSrv.destination,
      name: "built-elsewhere",
      dockerfile,
      ports_exposes: "8080",
      fqdn: `http://${DOMAIN}`,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    app = created.body.uuid;

    const dep = await deploy(app);
    const d = await settled(dep);
    expect(d.status, `${d.reason}\n${String(d.logs).slice(-3000)}`).toBe("finished");

    // Both phases in the deployment's log, in order: the build and push on host 1, then the pull on host 2.
    const logs = String(d.logs);
    expect(logs).toContain(`[capstan] building on the build server ${builderSrv.host.name} (${builderSrv.uuid})`);
    expect(logs).toMatch(/\[build\] Step 1\/\d+ : FROM capstan-test\/busybox/);
    expect(logs).toContain(`[build] pushing ${registryIp}:5000/capstan/${app}:${dep}`);
    const built = /\[capstan\] built (\S+); deploying it/.exec(logs);
    expect(built, logs.slice(-3000)).not.toBeNull();
    const image = built![1]!;
    expect(image).toMatch(new RegExp(`^${registryIp.replace(/\./g, "\\.")}:5000/capstan/${app}@sha256:[a-f0-9]{64}$`));
    expect(logs.indexOf("[build] pushed")).toBeLessThan(logs.indexOf(`pulling image ${image}`));
    expect(logs).not.toContain(REGISTRY_PASSWORD);

    // The jobs ran where they should: the build on host 1, the rollout on host 2.
    const jobs = await t.instance.database.prisma.job.findMany({ where: { type: { in: ["app.build", "app.deploy"] } }, orderBy: { createdAt: "asc" } });
    expect(jobs.map((j) => [j.type, j.serverId, j.status])).toEqual([
      ["app.build", builderSrv.id, "succeeded"],
      ["app.deploy", appSrv.id, "succeeded"],
    ]);

    // The registry holds the tag.
    const tags = await registryGet(`/v2/capstan/${app}/tags/list`);
    expect(tags.status).toBe(200);
    expect(JSON.parse(tags.body).tags).toEqual([dep]);

    // Host 2 could not have built it (it never had the base image), and runs the pulled image.
    const appHost = appSrv.host.name;
    await expect(onHost(appHost, "docker", "image", "inspect", BUSYBOX)).rejects.toThrow();
    const containers = (await onHost(appHost, "docker", "ps", "-q", "--filter", `label=capstan.resource.uuid=${app}`)).split("\n");
    expect(containers).toHaveLength(1);
    expect(await onHost(appHost, "docker", "inspect", "-f", "{{.Config.Image}}", containers[0]!)).toBe(image);
    const digests = await onHost(appHost, "docker", "image", "inspect", "-f", "{{json .RepoDigests}}", image);
    expect(JSON.parse(digests)).toContain(image);
    expect(await onHost(appHost, "docker", "image", "ls", "-q", `capstan/${app}`)).toBe("");

    // Host 1 built it and kept only the build cache: no tagged image, no container of the app.
    const builderHost = builderSrv.host.name;
    expect(await onHost(builderHost, "docker", "image", "ls", "-q", `${registryIp}:5000/capstan/${app}`)).toBe("");
    expect(await onHost(builderHost, "docker", "ps", "-aq", "--filter", `label=capstan.resource.uuid=${app}`)).toBe("");

    // And it answers through host 2's proxy.
    const res = await until("the app through host 2's proxy", async () => {
      const r = await viaProxy(appSrv.host, DOMAIN);
      return r.status === 200 && r.body.includes("built on the build server") ? r : false;
    }, 30_000, 250);
    expect(res.body.trim()).toBe("built on the build server");
  });

  it("a registry that no longer takes the instance's password: the deployment fails with the registry's reason; the old one keeps serving", async () => {
    expect(app).not.toBe("");
    await writeFile(join(authDir, "htpasswd"), `${await htpasswdLine(REGISTRY_USER, randomBytes(12).toString("hex"))}\n`, { mode: 0o600 });
    await sh("docker", ["restart", "-t", "2", REGISTRY_NAME]);
    expect(await sh("docker", ["inspect", "-f", `{{(index .NetworkSettings.Networks "${PREFIX}-net").IPAddress}}`, REGISTRY_NAME])).toBe(registryIp);
    await registryAnswers();

    const d = await settled(await deploy(app));
    expect(d.status).toBe("failed");
    console.log(`wrong registry password: ${d.reason}`);
    expect(d.reason).toMatch(new RegExp(`^the build on the build server ${PREFIX}-1 \\(.+\\) failed: pushing the image to the registry ${registryIp.replace(/\./g, "\\.")}:5000 failed: .*(unauthorized|authentication required)`, "i"));
    expect(JSON.stringify(d)).not.toContain(REGISTRY_PASSWORD);
    const r = await viaProxy(servers[1]!.host, DOMAIN);
    expect(r.status).toBe(200);
    expect(r.body).toContain("built on the build server");
  });
});
