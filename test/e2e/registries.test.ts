/**
 * Registries on real servers (issue 18, docs/registries.md): two test hosts, each a real Docker
 * Engine with the real agent started by the join command, and a real registry (Debian's
 * docker-registry 2.8 with htpasswd logins) on the hosts' network holding a private image.
 * The team's registry is assigned to both servers and synced: every process's command line
 * and environment on the machine are read during the sync and none holds the password. The
 * logins survive an agent restart, the private image deploys on both servers with them, an
 * image naming no host comes from the registry once it is the team's default, a login removed
 * by hand on a server shows as drift until a sync, and after DELETE (a logout on each server)
 * the next pull fails with the registry's reason.
 *
 * A second registry on the same network speaks token authentication (the registry's
 * `auth.token`: its challenge names a realm, a small token server of the test listening on the
 * network's gateway, where the test hosts reach this machine, that signs JWTs with a certificate
 * the registry trusts). Its connection test succeeds with the right login and fails with the
 * token service's reason with a wrong one; sync writes its logins on both servers; an image
 * behind it deploys on both, and a compose service's image behind it starts (compose's pull);
 * deleted, the next pull is refused.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, startTestInstance, type TeamFixture, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { scanProcesses } from "../support/process-scan.js";
import { startTokenServer, TOKEN_ISSUER, TOKEN_SERVICE, type TokenServer } from "../support/registry-server.js";
import { AGENT_IMAGE, INSECURE_REGISTRIES, REGISTRY_IMAGE, gatewayOf, loadImages, onHost, repo, sh, startHosts, startPrivateRegistry, stopHosts, until, type TestHost } from "./support/kit.js";
import { deploymentEnd } from "./support/local-server.js";

const PREFIX = "capregpull";
const BUSYBOX = "capstan-test/busybox:latest";
const REGISTRY_NAME = `${PREFIX}-registry`;
const USER = "team-puller";
const PASSWORD = `reg-${randomBytes(16).toString("hex")}`;
const TOKEN_REGISTRY_NAME = `${PREFIX}-token-registry`;
const TOKEN_USER = "token-puller";
const TOKEN_PASSWORD = `tok-${randomBytes(16).toString("hex")}`;

let t: TestInstance;
let team: TeamFixture;
let hosts: TestHost[];
let registryHost = "";
let authDir = "";
let project = "";
let registryId = 0;
let tokens: TokenServer | undefined;
let tokenRegistryHost = "";
let tokenDir = "";
const keys = new KeyFactory();
const servers: { uuid: string; destination: string; host: TestHost }[] = [];
const apps: string[] = [];

const image = (tag: string) => `${registryHost}/private/web:${tag}`;
const tokenImage = (tag: string) => `${tokenRegistryHost}/team/api:${tag}`;

/** A command in a test host with `input` on its standard input (the test's own push login: never in argv). */
const onHostWithInput = (host: string, input: string, ...argv: string[]) => sh("docker", ["exec", "-i", host, ...argv], { input });

async function deploy(app: string) {
  const res = await team.api.post(`/applications/${app}/deploy`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return deploymentEnd(team.api, res.body.deployment_uuid as string, 150_000);
}

/** The agent's last log lines on a test host (failure messages). */
const agentLogs = (host: string) => sh("docker", ["exec", host, "sh", "-c", "docker logs --tail 40 capstan-agent 2>&1"]).catch((e) => String(e));

const detail = async () => (await team.api.get(`/registries/${registryId}`)).body;

/** A registry's detail. */
const registryDetail = async (id: number) => (await team.api.get(`/registries/${id}`)).body;

/**
 * Assigns registry `id` to both servers and syncs it while every process on the machine is read
 * for `secret`: both servers synced, no process held it; answers the detail.
 */
async function syncScanned(id: number, secret: string) {
  const assigned = await team.api.patch(`/registries/${id}`, { server_ids: servers.map((s) => s.uuid) });
  expect(assigned.status, JSON.stringify(assigned.body)).toBe(200);
  const scan = scanProcesses(secret);
  let seen;
  let d;
  try {
    const sync = await team.api.post(`/registries/${id}/sync`);
    expect(sync.status).toBe(200);
    expect(sync.body.count).toBe(2);
    d = await until("both servers synced", async () => {
      const b = await registryDetail(id);
      if (b.servers.some((s: { sync_status: string }) => s.sync_status === "failed")) throw new Error(JSON.stringify(b.servers));
      return b.servers.length === 2 && b.servers.every((s: { sync_status: string }) => s.sync_status === "synced") ? b : false;
    }, 120_000, 250);
  } finally {
    seen = scan.stop();
  }
  expect(seen.hits).toEqual([]);
  expect(seen.passes).toBeGreaterThan(1);
  // The agents' processes (inside the test hosts) were among those read.
  expect(seen.processesSeen).toBeGreaterThan(20);
  expect(JSON.stringify(await registryDetail(id))).not.toContain(secret);
  return d;
}

/** An application of image `ref` on each server (`${name}-1`, `${name}-2`); their uuids in server order. */
async function appOnEachServer(name: string, ref: string): Promise<string[]> {
  const uuids: string[] = [];
  for (const [i, s] of servers.entries()) {
    const res = await team.api.post("/applications/dockerimage", {
      project_uuid: project,
      environment_name: "production",
      server_uuid: s.uuid,
      destination_uuid: s.destination,
      name: `${name}-${i + 1}`,
      docker_registry_image_name: ref,
      ports_exposes: "8080",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    uuids.push(res.body.uuid);
  }
  return uuids;
}

/** Deploys `uuids` (one per server) at once: each finished pulling `ref` as `user`, without `secret` in the deployment; each server runs `ref`. */
async function deployedWithLogin(uuids: string[], ref: string, user: string, secret: string) {
  const ends = await Promise.all(uuids.map((a) => deploy(a)));
  for (const d of ends) {
    expect(d.status, `${d.reason}\n${String(d.logs).slice(-2000)}`).toBe("finished");
    expect(String(d.logs)).toContain(`pulling image ${ref} (as ${user})`);
    expect(JSON.stringify(d)).not.toContain(secret);
  }
  for (const [i, s] of servers.entries()) {
    const ids = (await onHost(s.host.name, "docker", "ps", "-q", "--filter", `label=capstan.resource.uuid=${uuids[i]}`)).split("\n").filter(Boolean);
    expect(ids).toHaveLength(1);
    expect(await onHost(s.host.name, "docker", "inspect", "-f", "{{.Config.Image}}", ids[0]!)).toBe(ref);
  }
}

/**
 * DELETE of registry `id`: both servers log out (the logout jobs this DELETE wrote: payloads are
 * sealed); then `uuids` move to `ref`, a tag no server has, and each deploy fails without a login
 * with the registry's reason (matching `refused`), which is answered.
 */
async function deletedThenRefused(id: number, uuids: string[], ref: string, refused: RegExp): Promise<string> {
  const earlier = new Set((await t.instance.database.prisma.job.findMany({ where: { type: "registry.logout" }, select: { id: true } })).map((j) => j.id));
  const del = await team.api.delete(`/registries/${id}`);
  expect(del.status, JSON.stringify(del.body)).toBe(200);
  await until("both logouts done", async () => {
    const jobs = (await t.instance.database.prisma.job.findMany({ where: { type: "registry.logout" } })).filter((j) => !earlier.has(j.id));
    if (jobs.some((j) => j.status === "failed")) throw new Error(JSON.stringify(jobs.map((j) => j.error)));
    return jobs.length === 2 && jobs.every((j) => j.status === "succeeded");
  }, 60_000, 250);
  for (const app of uuids) {
    const patched = await team.api.patch(`/applications/${app}`, { docker_registry_image_name: ref });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  }
  const ends = await Promise.all(uuids.map((a) => deploy(a)));
  for (const d of ends) {
    expect(d.status).toBe("failed");
    expect(String(d.logs)).toContain(`pulling image ${ref}`);
    expect(String(d.logs)).not.toContain(`pulling image ${ref} (as`);
    expect(d.reason).toMatch(refused);
  }
  return String(ends[0]!.reason);
}

beforeAll(async () => {
  await sh("bash", [join(repo, "test/kit/images.sh"), "registry"]);
  hosts = await startHosts(2, PREFIX, { dockerdArgs: INSECURE_REGISTRIES });

  ({ host: registryHost, authDir } = await startPrivateRegistry(PREFIX, REGISTRY_NAME, USER, PASSWORD));

  // The token-auth registry: its realm is the token server on the gateway of the hosts' network.
  tokens = await startTokenServer({ username: TOKEN_USER, password: TOKEN_PASSWORD }, { host: await gatewayOf(`${PREFIX}-net`) });
  // Its own configuration file: Debian's names an htpasswd auth, which would win over token
  // variables; `auth.token` names the realm, the service and issuer the tokens carry, and the
  // certificate whose key signs them.
  tokenDir = await mkdtemp(join(tmpdir(), "capstan-regpull-token-"));
  await writeFile(join(tokenDir, "cert.pem"), await readFile(tokens.certFile));
  await writeFile(
    join(tokenDir, "config.yml"),
    [
      "version: 0.1",
      "log:",
      "  level: info",
      "storage:",
      "  filesystem:",
      "    rootdirectory: /var/lib/registry",
      "http:",
      "  addr: 0.0.0.0:5000",
      "auth:",
      "  token:",
      `    realm: ${tokens.realm}`,
      `    service: ${TOKEN_SERVICE}`,
      `    issuer: ${TOKEN_ISSUER}`,
      "    rootcertbundle: /auth/cert.pem",
      "",
    ].join("\n"),
  );
  await sh("docker", [
    "run", "-d", "--name", TOKEN_REGISTRY_NAME, "--network", `${PREFIX}-net`,
    "--label", "capstan.test=1", "--label", `capstan.test.prefix=${PREFIX}`,
    "-v", `${tokenDir}:/auth:ro`, REGISTRY_IMAGE, "docker-registry", "serve", "/auth/config.yml",
  ]);
  const tokenIp = await sh("docker", ["inspect", "-f", `{{(index .NetworkSettings.Networks "${PREFIX}-net").IPAddress}}`, TOKEN_REGISTRY_NAME]);
  tokenRegistryHost = `${tokenIp}:5000`;

  // A load into a busy host's engine fails now and then on this shared machine: tried again for up to 5 minutes.
  for (const h of hosts) await until(`images in ${h.name}`, () => loadImages(h.name, AGENT_IMAGE, "capstan/proxy:latest").then(() => true), 300_000, 1000);
  // The private image: built on host 1, pushed with the test's own login (stdin), then gone from
  // host 1 with its base image, so both servers can only get it from the registry.
  const [h1] = hosts as [TestHost];
  await loadImages(h1.name, BUSYBOX);
  const dockerfile = `FROM ${BUSYBOX}\nRUN mkdir -p /www && echo private > /www/index.html\nCMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n`;
  await onHostWithInput(h1.name, dockerfile, "docker", "build", "-q", "-t", image("1"), "-");
  await onHost(h1.name, "docker", "tag", image("1"), image("2"));
  await until("the registry to take the test's login", async () => {
    await onHostWithInput(h1.name, PASSWORD, "docker", "login", "-u", USER, "--password-stdin", registryHost);
    return true;
  }, 30_000, 500);
  for (const tag of ["1", "2"]) await onHost(h1.name, "docker", "push", image(tag));
  await onHost(h1.name, "docker", "logout", registryHost);
  // The same image behind the token registry (the test's login gets its token from the realm).
  for (const tag of ["1", "2", "3"]) await onHost(h1.name, "docker", "tag", image("1"), tokenImage(tag));
  await until("the token registry to take the test's login", async () => {
    await onHostWithInput(h1.name, TOKEN_PASSWORD, "docker", "login", "-u", TOKEN_USER, "--password-stdin", tokenRegistryHost);
    return true;
  }, 30_000, 500).catch(async (err) => {
    const logs = await sh("sh", ["-c", `docker logs --tail 30 ${TOKEN_REGISTRY_NAME} 2>&1`]).catch((e) => String(e));
    throw new Error(`${(err as Error).message}\ntoken server: ${tokens!.requests.slice(-10).join(" | ")}\nregistry: ${logs}`);
  });
  for (const tag of ["1", "2", "3"]) await onHost(h1.name, "docker", "push", tokenImage(tag));
  await onHost(h1.name, "docker", "logout", tokenRegistryHost);
  await onHost(h1.name, "docker", "rmi", image("1"), image("2"), tokenImage("1"), tokenImage("2"), tokenImage("3"), BUSYBOX);

  const gw = await gatewayOf(`${PREFIX}-net`);
  const port = await freePort();
  t = await startTestInstance(
    { PLATFORM_PUBLIC_URL: `http://${gw}:${port}`, PLATFORM_AGENT_IMAGE: AGENT_IMAGE, PLATFORM_PROXY_HTTP_PORT: "8081", PLATFORM_PROXY_HTTPS_PORT: "8443" },
    { host: "0.0.0.0", port },
  );
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["REGISTRY_MANAGEMENT"] });
  const key = await keys.generate("ed25519");
  const keyUuid = (await team.api.post("/security/keys", { name: "hosts", private_key: key.privateKey })).body.uuid;
  for (const host of hosts) {
    const created = await team.api.post("/servers", { name: host.name, ip: host.ip, private_key_uuid: keyUuid });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await onHost(host.name, "sh", "-c", created.body.join_command);
    servers.push({ uuid: created.body.uuid, destination: (await team.api.get(`/servers/${created.body.uuid}`)).body.destinations[0].uuid, host });
  }
  for (const s of servers) {
    await until(`${s.host.name} reachable`, async () => (await team.api.get(`/servers/${s.uuid}`)).body.status === "reachable", 60_000);
  }
  project = (await team.api.post("/projects", { name: "registries" })).body.uuid;
}, 600_000);

afterAll(async () => {
  await t?.close();
  await sh("docker", ["rm", "-f", REGISTRY_NAME, TOKEN_REGISTRY_NAME]).catch(() => {});
  await tokens?.stop();
  await stopHosts(PREFIX).catch(() => {});
  if (authDir) await rm(authDir, { recursive: true, force: true });
  if (tokenDir) await rm(tokenDir, { recursive: true, force: true });
  keys.cleanup();
});

describe("a registry synced to two servers: private images deploy on both; deleted, the next pull fails", () => {
  it("sync writes the login on both servers, and no process's command line or environment holds the password", async () => {
    const created = await team.api.post("/registries", { name: "private", type: "custom", url: `http://${registryHost}`, credentials: { username: USER, password: PASSWORD } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    registryId = created.body.data.id;
    const d = await syncScanned(registryId, PASSWORD);
    expect(d.servers.map((s: { uuid: string }) => s.uuid).sort()).toEqual(servers.map((s) => s.uuid).sort());
    for (const s of d.servers) expect(s.fingerprint).toMatch(/^[0-9a-f]{16}$/);
  });

  it("after an agent restart the logins are still there: the private image deploys on both servers", async () => {
    expect(registryId).toBeGreaterThan(0);
    const second = servers[1]!;
    await onHost(second.host.name, "docker", "restart", "capstan-agent");
    await until(`${second.host.name} reachable again`, async () => (await team.api.get(`/servers/${second.uuid}`)).body.status === "reachable", 150_000).catch(async (err) => {
      throw new Error(`${(err as Error).message}\nagent: ${await agentLogs(second.host.name)}`);
    });

    apps.push(...(await appOnEachServer("private", image("1"))));
    await deployedWithLogin(apps, image("1"), USER, PASSWORD);
  });

  it("the default registry: an image naming no host is pulled from it (the change reaches the servers at once)", async () => {
    expect(apps).toHaveLength(2);
    const patched = await team.api.patch(`/registries/${registryId}`, { is_default: true });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await until("both servers logged in again", async () => (await detail()).servers.every((s: { sync_status: string }) => s.sync_status === "synced"), 60_000, 250);
    const s = servers[1]!;
    const res = await team.api.post("/applications/dockerimage", {
      project_uuid: project,
      environment_name: "production",
      server_uuid: s.uuid,
      destination_uuid: s.destination,
      name: "hostless",
      docker_registry_image_name: "private/web:1",
      ports_exposes: "8080",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const d = await deploy(res.body.uuid);
    expect(d.status, `${d.reason}\n${String(d.logs).slice(-2000)}`).toBe("finished");
    expect(String(d.logs)).toContain(`pulling image ${image("1")} (as ${USER})`);
    const ids = (await onHost(s.host.name, "docker", "ps", "-q", "--filter", `label=capstan.resource.uuid=${res.body.uuid}`)).split("\n").filter(Boolean);
    expect(await onHost(s.host.name, "docker", "inspect", "-f", "{{.Config.Image}}", ids[0]!)).toBe("private/web:1");
  });

  it("a login removed by hand on a server shows as drift (from the agent's next facts); sync writes it again", async () => {
    const first = servers[0]!;
    const file = "/var/lib/capstan-agent/docker/config.json";
    await onHost(first.host.name, "docker", "exec", "capstan-agent", "node", "-e",
      `const fs=require("fs");const c=JSON.parse(fs.readFileSync(${JSON.stringify(file)},"utf8"));c.auths={};fs.writeFileSync(${JSON.stringify(file)},JSON.stringify(c))`);
    const drifted = await until("drift on the first server", async () => {
      const b = await detail();
      return b.servers.find((x: { uuid: string }) => x.uuid === first.uuid)?.drift === true ? b : false;
    }, 150_000, 1000).catch(async (err) => {
      const row = await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: first.uuid } });
      const logs = await agentLogs(first.host.name);
      const file = await onHost(first.host.name, "docker", "exec", "capstan-agent", "cat", "/var/lib/capstan-agent/docker/capstan-registries.json").catch((e) => String(e));
      throw new Error(`${(err as Error).message}\nserver: ${row.status} ${row.lastSeenAt?.toISOString()} facts.registries=${JSON.stringify(JSON.parse(row.facts ?? "{}").registries)}\ndetail: ${JSON.stringify((await detail()).servers)}\nmeta: ${file}\nagent: ${logs}`);
    });
    expect(drifted.servers.find((x: { uuid: string }) => x.uuid === servers[1]!.uuid).drift).toBe(false);
    expect((await team.api.post(`/registries/${registryId}/sync`)).body.count).toBe(2);
    await until("no drift after the sync", async () => {
      const b = await detail();
      return b.servers.every((x: { sync_status: string; drift: boolean }) => x.sync_status === "synced" && !x.drift);
    }, 60_000, 250);
  });

  it("DELETE logs out on both servers; the next pull fails with the registry's reason, never with the old login", async () => {
    expect(apps).toHaveLength(2);
    const reason = await deletedThenRefused(registryId, apps, image("2"), /no basic auth credentials|unauthorized|authentication required/i);
    console.log(`after the logout: ${reason}`);
  });
});

describe("a registry with token authentication (a realm the registry names): test, sync, a private image on both servers", () => {
  let id = 0;
  const tokenApps: string[] = [];

  it("the connection test fails with the token service's reason for a wrong password and succeeds with the right one", async () => {
    const refused = tokens!.counts.refused;
    const created = await team.api.post("/registries", { name: "token-auth", type: "custom", url: `http://${tokenRegistryHost}`, credentials: { username: TOKEN_USER, password: "not-the-password" } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    id = created.body.data.id;
    const bad = await team.api.post(`/registries/${id}/test`);
    expect(bad.status, JSON.stringify(bad.body)).toBe(200);
    expect(bad.body.authenticated).toBe(false);
    expect(bad.body.error).toMatch(/token service .*401.*incorrect username or password/);
    expect(tokens!.counts.refused).toBeGreaterThan(refused);

    const issued = tokens!.counts.issued;
    const fixed = await team.api.patch(`/registries/${id}`, { credentials: { username: TOKEN_USER, password: TOKEN_PASSWORD } });
    expect(fixed.status, JSON.stringify(fixed.body)).toBe(200);
    const good = await team.api.post(`/registries/${id}/test`);
    expect(good.status, JSON.stringify(good.body)).toBe(200);
    expect(good.body, JSON.stringify(good.body)).toMatchObject({ authenticated: true });
    expect(tokens!.counts.issued).toBe(issued + 1);
    expect(JSON.stringify([bad.body, good.body, fixed.body])).not.toContain(TOKEN_PASSWORD);
  });

  it("sync writes the login on both servers (no process's command line or environment holds the password)", async () => {
    expect(id).toBeGreaterThan(0);
    const issued = tokens!.counts.issued;
    await syncScanned(id, TOKEN_PASSWORD);
    // Each server's engine checked the login against the realm (a token each).
    expect(tokens!.counts.issued).toBeGreaterThanOrEqual(issued + 2);
  });

  it("an image behind the token registry deploys on both servers with the stored login", async () => {
    expect(id).toBeGreaterThan(0);
    tokenApps.push(...(await appOnEachServer("token", tokenImage("1"))));
    const issued = tokens!.counts.issued;
    await deployedWithLogin(tokenApps, tokenImage("1"), TOKEN_USER, TOKEN_PASSWORD);
    // The pulls asked the realm for their tokens.
    expect(tokens!.counts.issued).toBeGreaterThanOrEqual(issued + 2);
    // Nothing secret in the agents' logs, nor in any plaintext column of the rows the login
    // went through (registry, its servers' state, the jobs and their logs, the deployments).
    const secretForms = [TOKEN_PASSWORD, Buffer.from(`${TOKEN_USER}:${TOKEN_PASSWORD}`).toString("base64")];
    for (const s of servers) {
      const logs = await sh("sh", ["-c", `docker exec ${s.host.name} docker logs capstan-agent 2>&1`]);
      expect(logs.length).toBeGreaterThan(0);
      for (const secret of secretForms) expect(logs).not.toContain(secret);
    }
    const db = t.instance.database.prisma;
    const rows = JSON.stringify([
      await db.registry.findMany(),
      await db.registryServer.findMany(),
      await db.job.findMany(),
      await db.deployment.findMany(),
      await db.server.findMany(),
    ]);
    expect(rows).toContain(tokenRegistryHost);
    for (const secret of secretForms) expect(rows).not.toContain(secret);
  });

  it("a service whose compose file names an image behind the token registry starts: compose pulls with the stored login", async () => {
    expect(id).toBeGreaterThan(0);
    const s = servers[1]!;
    const created = await team.api.post("/services", {
      project_uuid: project,
      environment_name: "production",
      server_uuid: s.uuid,
      destination_uuid: s.destination,
      name: "token-service",
      docker_compose_raw: `services:\n  web:\n    image: ${tokenImage("3")}\n`,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = created.body.uuid as string;
    const issued = tokens!.counts.issued;
    const started = await team.api.post(`/services/${uuid}/start`);
    expect([200, 202], JSON.stringify(started.body)).toContain(started.status);
    await until("the service to be running", async () => {
      const st = (await team.api.get(`/services/${uuid}`)).body.status as string;
      if (/^exited|^failed/.test(st)) throw new Error(st);
      return /^running/.test(st);
    }, 150_000, 500).catch(async (err) => {
      const jobs = await t.instance.database.prisma.job.findMany({ where: { type: { in: ["service.deploy", "service.action"] } }, select: { status: true, error: true } });
      throw new Error(`${(err as Error).message}\njobs: ${JSON.stringify(jobs)}\nagent: ${await agentLogs(s.host.name)}`);
    });
    const ids = (await onHost(s.host.name, "docker", "ps", "-q", "--filter", `label=capstan.resource.uuid=${uuid}`)).split("\n").filter(Boolean);
    expect(ids).toHaveLength(1);
    expect(await onHost(s.host.name, "docker", "inspect", "-f", "{{.Config.Image}}", ids[0]!)).toBe(tokenImage("3"));
    // The pull asked the realm for its token with the stored login.
    expect(tokens!.counts.issued).toBeGreaterThan(issued);
  });

  it("DELETE logs out on both servers; the next pull is refused by the token service", async () => {
    expect(tokenApps).toHaveLength(2);
    const reason = await deletedThenRefused(id, tokenApps, tokenImage("2"), /unauthorized|authentication required|incorrect username or password/i);
    console.log(`token registry, after the logout: ${reason}`);
  });
});
