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
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, startTestInstance, type TeamFixture, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { scanProcesses } from "../support/process-scan.js";
import { AGENT_IMAGE, gatewayOf, loadImages, onHost, repo, sh, startHosts, stopHosts, until, type TestHost } from "./support/kit.js";
import { deploymentEnd } from "./support/local-server.js";

const PREFIX = "capregpull";
const BUSYBOX = "capstan-test/busybox:latest";
const REGISTRY_IMAGE = "capstan-test/registry:latest";
const REGISTRY_NAME = `${PREFIX}-registry`;
const USER = "team-puller";
const PASSWORD = `reg-${randomBytes(16).toString("hex")}`;
const INSECURE = "--insecure-registry 172.16.0.0/12 --insecure-registry 192.168.0.0/16 --insecure-registry 10.0.0.0/8";

let t: TestInstance;
let team: TeamFixture;
let hosts: TestHost[];
let registryHost = "";
let authDir = "";
let project = "";
let registryId = 0;
const keys = new KeyFactory();
const servers: { uuid: string; destination: string; host: TestHost }[] = [];
const apps: string[] = [];

const image = (tag: string) => `${registryHost}/private/web:${tag}`;

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

beforeAll(async () => {
  await sh("bash", [join(repo, "test/kit/images.sh"), "registry"]);
  hosts = await startHosts(2, PREFIX, { dockerdArgs: INSECURE });

  authDir = await mkdtemp(join(tmpdir(), "capstan-regpull-auth-"));
  const line = await sh("docker", ["run", "--rm", "-i", "--label", "capstan.test=1", REGISTRY_IMAGE, "htpasswd", "-niB", USER], { input: PASSWORD });
  await writeFile(join(authDir, "htpasswd"), `${line}\n`, { mode: 0o600 });
  await sh("docker", [
    "run", "-d", "--name", REGISTRY_NAME, "--network", `${PREFIX}-net`,
    "--label", "capstan.test=1", "--label", `capstan.test.prefix=${PREFIX}`,
    "-e", "REGISTRY_AUTH_HTPASSWD_REALM=capstan-test", "-e", "REGISTRY_AUTH_HTPASSWD_PATH=/auth/htpasswd",
    "-v", `${authDir}:/auth:ro`, REGISTRY_IMAGE,
  ]);
  const ip = await sh("docker", ["inspect", "-f", `{{(index .NetworkSettings.Networks "${PREFIX}-net").IPAddress}}`, REGISTRY_NAME]);
  registryHost = `${ip}:5000`;

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
  await onHost(h1.name, "docker", "rmi", image("1"), image("2"), BUSYBOX);

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
  await sh("docker", ["rm", "-f", REGISTRY_NAME]).catch(() => {});
  await stopHosts(PREFIX).catch(() => {});
  if (authDir) await rm(authDir, { recursive: true, force: true });
  keys.cleanup();
});

describe("a registry synced to two servers: private images deploy on both; deleted, the next pull fails", () => {
  it("sync writes the login on both servers, and no process's command line or environment holds the password", async () => {
    const created = await team.api.post("/registries", { name: "private", type: "custom", url: `http://${registryHost}`, credentials: { username: USER, password: PASSWORD } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    registryId = created.body.data.id;
    const assigned = await team.api.patch(`/registries/${registryId}`, { server_ids: servers.map((s) => s.uuid) });
    expect(assigned.status, JSON.stringify(assigned.body)).toBe(200);

    const scan = scanProcesses(PASSWORD);
    let seen;
    try {
      const sync = await team.api.post(`/registries/${registryId}/sync`);
      expect(sync.status).toBe(200);
      expect(sync.body.count).toBe(2);
      const d = await until("both servers synced", async () => {
        const b = await detail();
        if (b.servers.some((s: { sync_status: string }) => s.sync_status === "failed")) throw new Error(JSON.stringify(b.servers));
        return b.servers.every((s: { sync_status: string }) => s.sync_status === "synced") ? b : false;
      }, 120_000, 250);
      expect(d.servers.map((s: { uuid: string }) => s.uuid).sort()).toEqual(servers.map((s) => s.uuid).sort());
      for (const s of d.servers) expect(s.fingerprint).toMatch(/^[0-9a-f]{16}$/);
    } finally {
      seen = scan.stop();
    }
    expect(seen.hits).toEqual([]);
    expect(seen.passes).toBeGreaterThan(1);
    // The agents' processes (inside the test hosts) were among those read.
    expect(seen.processesSeen).toBeGreaterThan(20);
    expect(JSON.stringify(await detail())).not.toContain(PASSWORD);
  });

  it("after an agent restart the logins are still there: the private image deploys on both servers", async () => {
    expect(registryId).toBeGreaterThan(0);
    const second = servers[1]!;
    await onHost(second.host.name, "docker", "restart", "capstan-agent");
    await until(`${second.host.name} reachable again`, async () => (await team.api.get(`/servers/${second.uuid}`)).body.status === "reachable", 150_000).catch(async (err) => {
      throw new Error(`${(err as Error).message}\nagent: ${await agentLogs(second.host.name)}`);
    });

    for (const [i, s] of servers.entries()) {
      const res = await team.api.post("/applications/dockerimage", {
        project_uuid: project,
        environment_name: "production",
        server_uuid: s.uuid,
        destination_uuid: s.destination,
        name: `private-${i + 1}`,
        docker_registry_image_name: image("1"),
        ports_exposes: "8080",
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      apps.push(res.body.uuid);
    }
    const ends = await Promise.all(apps.map((a) => deploy(a)));
    for (const d of ends) {
      expect(d.status, `${d.reason}\n${String(d.logs).slice(-2000)}`).toBe("finished");
      expect(String(d.logs)).toContain(`pulling image ${image("1")} (as ${USER})`);
      expect(JSON.stringify(d)).not.toContain(PASSWORD);
    }
    for (const [i, s] of servers.entries()) {
      const ids = (await onHost(s.host.name, "docker", "ps", "-q", "--filter", `label=capstan.resource.uuid=${apps[i]}`)).split("\n").filter(Boolean);
      expect(ids).toHaveLength(1);
      expect(await onHost(s.host.name, "docker", "inspect", "-f", "{{.Config.Image}}", ids[0]!)).toBe(image("1"));
    }
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
    const del = await team.api.delete(`/registries/${registryId}`);
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    await until("both logouts done", async () => {
      const jobs = await t.instance.database.prisma.job.findMany({ where: { type: "registry.logout" } });
      if (jobs.some((j) => j.status === "failed")) throw new Error(JSON.stringify(jobs.map((j) => j.error)));
      return jobs.length === 2 && jobs.every((j) => j.status === "succeeded");
    }, 60_000, 250);

    // A new tag: the server has no copy, the pull goes to the registry without a login.
    for (const app of apps) {
      const patched = await team.api.patch(`/applications/${app}`, { docker_registry_image_name: image("2") });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    }
    const ends = await Promise.all(apps.map((a) => deploy(a)));
    for (const d of ends) {
      expect(d.status).toBe("failed");
      expect(String(d.logs)).toContain(`pulling image ${image("2")}`);
      expect(String(d.logs)).not.toContain(`pulling image ${image("2")} (as`);
      expect(d.reason).toMatch(/no basic auth credentials|unauthorized|authentication required/i);
    }
    console.log(`after the logout: ${ends[0]!.reason}`);
  });
});
