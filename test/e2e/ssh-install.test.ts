import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, startTestInstance, type TeamFixture, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { gatewayOf, loadImages, onHost, sh, startHosts, stopHosts, until, type TestHost, AGENT_IMAGE } from "./support/kit.js";

/**
 * The control plane installs the agent itself over real SSH (an sshd inside a test host),
 * with the server's private key, and pins the host key on first use.
 */
const PREFIX = "capssh";
let t: TestInstance;
let team: TeamFixture;
let host: TestHost;
let serverUuid: string;
const keys = new KeyFactory();

const status = async () => (await team.api.get(`/servers/${serverUuid}`)).body.status as string;

beforeAll(async () => {
  [host] = (await startHosts(1, PREFIX)) as [TestHost];
  await loadImages(host.name, AGENT_IMAGE);
  const key = await keys.generate("ed25519");
  // An sshd that accepts exactly this key for root.
  await onHost(host.name, "sh", "-c", "mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh && ssh-keygen -A >/dev/null");
  await sh("docker", ["exec", "-i", host.name, "sh", "-c", "cat > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys"], {
    input: key.publicKey + "\n",
  });
  await onHost(host.name, "/usr/sbin/sshd");

  const gw = await gatewayOf(`${PREFIX}-net`);
  const port = await freePort();
  t = await startTestInstance({ PLATFORM_PUBLIC_URL: `http://${gw}:${port}` }, { host: "0.0.0.0", port });
  team = await t.newTeam();
  const keyUuid = (await team.api.post("/security/keys", { name: "ssh", private_key: key.privateKey })).body.uuid;
  const created = await team.api.post("/servers", { name: "ssh-host", ip: host.ip, port: 22, user: "root", private_key_uuid: keyUuid });
  expect(created.status).toBe(201);
  serverUuid = created.body.uuid;
});

afterAll(async () => {
  await t?.close();
  await stopHosts(PREFIX).catch(() => {});
  keys.cleanup();
});

describe("agent installation over SSH", () => {
  it("installs the agent, which connects and validates", async () => {
    const res = await team.api.post(`/servers/${serverUuid}/install-agent`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ message: "Agent installed.", exit_code: 0 });
    await until("agent connected", async () => (await status()) === "reachable", 60_000);
    const v = await team.api.get(`/servers/${serverUuid}/validate`);
    expect(v.status).toBe(200);
    const row = await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: serverUuid } });
    expect(row.sshHostKey).toMatch(/^SHA256:/);
    const fingerprints = await onHost(host.name, "sh", "-c", "for f in /etc/ssh/ssh_host_*_key.pub; do ssh-keygen -lf $f; done");
    expect(fingerprints).toContain(row.sshHostKey!);
  });

  it("reinstalling replaces the agent (one container) with a new token", async () => {
    const res = await team.api.post(`/servers/${serverUuid}/install-agent`);
    expect(res.status).toBe(200);
    await until("agent back", async () => (await status()) === "reachable" && (await team.api.get(`/servers/${serverUuid}`)).body.agent.connected, 60_000);
    const agents = (await onHost(host.name, "docker", "ps", "-aq", "--filter", "name=^/capstan-agent$")).split("\n").filter(Boolean);
    expect(agents).toHaveLength(1);
  });

  it("refuses to run anything when the host key changed", async () => {
    await onHost(host.name, "sh", "-c", "rm -f /etc/ssh/ssh_host_* && ssh-keygen -A >/dev/null && kill -HUP $(cat /run/sshd.pid)");
    const before = await onHost(host.name, "docker", "inspect", "-f", "{{.Id}}", "capstan-agent");
    const res = await team.api.post(`/servers/${serverUuid}/install-agent`);
    expect(res.status).toBe(502);
    expect(res.body.message).toMatch(/SSH/);
    expect(await onHost(host.name, "docker", "inspect", "-f", "{{.Id}}", "capstan-agent")).toBe(before);
    // The failed attempt left the running agent and its token alone.
    expect(await status()).toBe("reachable");
    expect((await team.api.get(`/servers/${serverUuid}`)).body.agent.connected).toBe(true);
  });

  it("reports an unreachable SSH port clearly", async () => {
    const patch = await team.api.patch(`/servers/${serverUuid}`, { port: 2222 });
    expect(patch.status).toBe(200);
    const res = await team.api.post(`/servers/${serverUuid}/install-agent`);
    expect(res.status).toBe(502);
    expect(res.body.message).toMatch(/SSH connection to .*:2222 failed/);
  });
});
