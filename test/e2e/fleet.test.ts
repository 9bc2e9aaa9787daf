import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EV, type ServerStatusEvent } from "@capstan/shared";
import { freePort, startTestInstance, type TeamFixture, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { connectFleet } from "../api/support/fake-agent.js";
import { gatewayOf, loadImages, onHost, sh, startHosts, stopHosts, until, type TestHost, AGENT_IMAGE } from "./support/kit.js";

/**
 * Issue: agents on real hosts. Two test hosts (each a real Docker Engine), the real agent
 * image started on each with the join command the API hands out, a real control plane.
 */
const PREFIX = "capfleet";
const BUSYBOX = "capstan-test/busybox:latest";
let t: TestInstance;
let team: TeamFixture;
let hosts: TestHost[];
const servers: { uuid: string; id: number; host: TestHost }[] = [];
const keys = new KeyFactory();

const serverRow = (uuid: string) => t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid } });
const status = async (uuid: string) => (await team.api.get(`/servers/${uuid}`)).body.status as string;
const containersNamed = async (host: string, name: string) =>
  (await onHost(host, "docker", "ps", "-aq", "--filter", `name=^/${name}$`)).split("\n").filter(Boolean).length;

beforeAll(async () => {
  hosts = await startHosts(2, PREFIX);
  await Promise.all(hosts.map((h) => loadImages(h.name, AGENT_IMAGE, BUSYBOX)));
  const gw = await gatewayOf(`${PREFIX}-net`);
  const port = await freePort();
  t = await startTestInstance({ PLATFORM_PUBLIC_URL: `http://${gw}:${port}` }, { host: "0.0.0.0", port });
  team = await t.newTeam();
  const key = await keys.generate("ed25519");
  const keyUuid = (await team.api.post("/security/keys", { name: "hosts", private_key: key.privateKey })).body.uuid;
  for (const host of hosts) {
    const created = await team.api.post("/servers", { name: host.name, ip: host.ip, private_key_uuid: keyUuid });
    expect(created.status).toBe(201);
    // What an operator does: run the join command on the host.
    await onHost(host.name, "sh", "-c", created.body.join_command);
    servers.push({ uuid: created.body.uuid, id: (await serverRow(created.body.uuid)).id, host });
  }
  for (const s of servers) await until(`${s.host.name} reachable`, async () => (await status(s.uuid)) === "reachable", 60_000);
});

afterAll(async () => {
  await t?.close();
  await stopHosts(PREFIX).catch(() => {});
  keys.cleanup();
});

describe("agents on real hosts", () => {
  it("validate reports the host's real engine version and compose", async () => {
    for (const s of servers) {
      const engine = await onHost(s.host.name, "docker", "version", "-f", "{{.Server.Version}}");
      const res = await team.api.get(`/servers/${s.uuid}/validate`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ message: "Server is reachable and usable.", docker_version: engine });
      const detail = (await team.api.get(`/servers/${s.uuid}`)).body;
      expect(detail.settings).toEqual({ is_reachable: true, is_usable: true, unusable_reason: null });
      expect(detail.engine.version).toBe(engine);
      expect(detail.engine.compose_version).toMatch(/^\d+\.\d+/);
      expect(detail.agent.connected).toBe(true);
      expect(detail.host.cpu_cores).toBeGreaterThan(0);
    }
  });

  it("the prepare job created the server's network on each host", async () => {
    for (const s of servers) {
      await until("network capstan", async () => (await onHost(s.host.name, "docker", "network", "ls", "-q", "--filter", "name=^capstan$")).length > 0);
    }
  });

  it("a job runs on the right host only, and resources/domains come from the engine", async () => {
    const [a, b] = servers as [(typeof servers)[0], (typeof servers)[0]];
    const done = await t.instance.jobs.run(a.id, "container.ensure", {
      name: "capfleet-web",
      image: BUSYBOX,
      cmd: ["httpd", "-f", "-p", "8080"],
      labels: {
        "capstan.resource.uuid": "res-web",
        "capstan.resource.name": "web",
        "capstan.resource.type": "application",
        "capstan.domains": "web.example.test",
      },
      network: "capstan",
      restart: "unless-stopped",
    });
    expect(done.status).toBe("succeeded");
    expect(await containersNamed(a.host.name, "capfleet-web")).toBe(1);
    expect(await containersNamed(b.host.name, "capfleet-web")).toBe(0);

    // A container the platform has no record of is not one of the server's resources (issue 15:
    // the lists come from the records; a resource's container is merged in when the agent answers).
    expect((await team.api.get(`/servers/${a.uuid}/resources`)).body.data).toEqual([]);
    expect((await team.api.get(`/servers/${b.uuid}/resources`)).body.data).toEqual([]);
    expect((await team.api.get(`/servers/${a.uuid}/domains`)).body.data).toEqual([]);
  });
});

describe("faults", () => {
  it("killing the agent mid-job and restarting it: the job takes effect exactly once", async () => {
    const a = servers[0]!;
    const id = await t.instance.jobs.enqueue(t.instance.database.prisma, a.id, "container.ensure", {
      name: "capfleet-once",
      image: BUSYBOX,
      cmd: ["sleep", "3600"],
      labels: {},
      restart: "no",
    });
    void t.instance.jobs.kick(a.id);
    // Kill as soon as the agent has taken the job (acked), whether or not it created the container yet.
    await until("job taken", async () => (await t.instance.database.prisma.job.findUniqueOrThrow({ where: { id } })).status !== "queued", 10_000, 20);
    await onHost(a.host.name, "docker", "kill", "capstan-agent");
    await onHost(a.host.name, "docker", "start", "capstan-agent");
    const done = await t.instance.jobs.wait(id);
    expect(done.status).toBe("succeeded");
    expect(await containersNamed(a.host.name, "capfleet-once")).toBe(1);
    const row = await t.instance.database.prisma.job.findUniqueOrThrow({ where: { id } });
    expect(row.attempt).toBeGreaterThanOrEqual(1);
  });

  it("restarting the control plane while a job waits for its agent loses nothing", async () => {
    const a = servers[0]!;
    await onHost(a.host.name, "docker", "pause", "capstan-agent");
    const id = await t.instance.jobs.enqueue(t.instance.database.prisma, a.id, "container.ensure", {
      name: "capfleet-restart",
      image: BUSYBOX,
      cmd: ["sleep", "3600"],
      labels: {},
      restart: "no",
    });
    await t.restart(500);
    await onHost(a.host.name, "docker", "unpause", "capstan-agent");
    await until("agent back", async () => (await status(a.uuid)) === "reachable" && t.instance.gateway?.isConnected(a.id), 60_000);
    const done = await t.instance.jobs.wait(id);
    expect(done.status).toBe("succeeded");
    expect(await containersNamed(a.host.name, "capfleet-restart")).toBe(1);
  });

  it("a host whose connection is cut is unreachable within 10 s, and reachable again after", async () => {
    const b = servers[1]!;
    const net = `${PREFIX}-net`;
    await until("b reachable", async () => (await status(b.uuid)) === "reachable", 60_000);
    const fleet = await connectFleet(t.url, team.token);
    const events: ServerStatusEvent[] = [];
    fleet.on(EV.serverStatus, (e: ServerStatusEvent) => events.push(e));
    try {
      // The host drops off the network without closing anything: no FIN reaches the control
      // plane, only the missing heartbeat tells. (Pausing the host container would not do:
      // its inner containers, the agent among them, live in their own cgroup.)
      await sh("docker", ["network", "disconnect", net, b.host.name]);
      const cut = Date.now();
      await until("unreachable", async () => (await status(b.uuid)) === "unreachable", 15_000, 100);
      const detectedMs = Date.now() - cut;
      expect(detectedMs).toBeLessThan(10_000);
      await sh("docker", ["network", "connect", net, b.host.name]);
      await until("reachable again", async () => (await status(b.uuid)) === "reachable", 60_000);
      await until(
        "fleet events",
        async () => events.some((e) => e.uuid === b.uuid && e.status === "unreachable") && events.some((e) => e.uuid === b.uuid && e.status === "reachable"),
        5_000,
      );
      console.log(`unreachable detected ${detectedMs} ms after the cut`);
    } finally {
      fleet.close();
      await sh("docker", ["network", "connect", net, b.host.name]).catch(() => {});
    }
  });

  it("a frozen agent process (paused container) is noticed the same way", async () => {
    const a = servers[0]!;
    await until("a reachable", async () => (await status(a.uuid)) === "reachable", 60_000);
    await onHost(a.host.name, "docker", "pause", "capstan-agent");
    const paused = Date.now();
    try {
      await until("unreachable", async () => (await status(a.uuid)) === "unreachable", 15_000, 100);
      expect(Date.now() - paused).toBeLessThan(10_000);
    } finally {
      await onHost(a.host.name, "docker", "unpause", "capstan-agent");
    }
    await until("reachable again", async () => (await status(a.uuid)) === "reachable", 60_000);
  });
});
