import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Socket } from "socket.io-client";
import { EV, type ServerStatusEvent } from "@capstan/shared";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { connectFleet, type ScriptedAgent } from "./support/fake-agent.js";
import { connectedWorld, createImageApp, ok, placement, until, type AppWorld } from "./support/applications.js";

/**
 * The dashboards' stream (/fleet) inside one team (issue 15, item 3): `resource:status` only
 * for what the token's user may see (the REST API's rules), `server:status` team-wide, and a
 * token that stops granting access (revoked, expired, member removed) stops the stream.
 */
let t: TestInstance;
let w: AppWorld;
let agent: ScriptedAgent;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];
const sockets: Socket[] = [];
let shown: { uuid: string };
let hidden: { uuid: string };
let hiddenEnvId: number;

interface Listener {
  socket: Socket;
  resources: { uuid: string; status: string }[];
  servers: ServerStatusEvent[];
  disconnected: string[];
}

async function listen(token: string): Promise<Listener> {
  const socket = await connectFleet(t.url, token);
  sockets.push(socket);
  const l: Listener = { socket, resources: [], servers: [], disconnected: [] };
  socket.on(EV.resourceStatus, (e: { uuid: string; status: string }) => l.resources.push(e));
  socket.on(EV.serverStatus, (e: ServerStatusEvent) => l.servers.push(e));
  socket.on("disconnect", (reason) => l.disconnected.push(reason));
  return l;
}

let seq = 0;
/** The agent reports a new status for both applications; resolves once the owner heard both. */
async function report(owner: Listener): Promise<string> {
  const status = ["running:healthy", "running:unhealthy", "exited"][seq++ % 3]!;
  agent.socket.emit(EV.resourceStatus, {
    full: false,
    resources: [
      { uuid: shown.uuid, type: "application", status },
      { uuid: hidden.uuid, type: "application", status },
    ],
  });
  await until(async () => [shown.uuid, hidden.uuid].every((u) => owner.resources.some((e) => e.uuid === u && e.status === status)));
  // Batches go to every dashboard of the team in one pass: the others had their turn by now.
  await new Promise((r) => setTimeout(r, 200));
  return status;
}

const tokenId = async (userId: number) => (await t.instance.database.prisma.apiToken.findFirstOrThrow({ where: { userId }, orderBy: { id: "desc" } })).id;

beforeAll(async () => {
  t = await startTestInstance();
  ({ w, agent } = await connectedWorld(t, keys, agents));
  shown = await createImageApp(w, { name: "shown" });
  const other = await ok(w.api.post("/projects", { name: "hidden" }), "project");
  hidden = await createImageApp(w, { ...placement(w), project_uuid: other.uuid, name: "hidden" });
  const env = await t.instance.database.prisma.environment.findFirstOrThrow({ where: { project: { uuid: other.uuid }, name: "production" } });
  hiddenEnvId = env.id;
});
afterAll(async () => {
  for (const s of sockets) s.close();
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

describe("/fleet resource events follow the caller's visibility", () => {
  it("owners, admins and viewers hear every resource; members only those their grants show; server events are team-wide", async () => {
    const owner = await listen(w.team.token);
    const viewer = await listen((await t.newMember(w.team.teamId, "viewer", ["read"])).token);
    const admin = await listen((await t.newMember(w.team.teamId, "admin", ["read"])).token);
    const projectMember = await t.newMember(w.team.teamId, "member", ["read"]);
    const envMember = await t.newMember(w.team.teamId, "member", ["read"]);
    const bareMember = await t.newMember(w.team.teamId, "member", ["read"]);
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: projectMember.userId, permission_level: "view_only" }), "grant");
    await ok(w.api.post("/permissions/environment", { environment_id: hiddenEnvId, user_id: envMember.userId, permission_level: "deploy" }), "grant");
    const byProject = await listen(projectMember.token);
    const byEnvironment = await listen(envMember.token);
    const noGrant = await listen(bareMember.token);

    const status = await report(owner);
    const heard = (l: Listener) => l.resources.filter((e) => e.status === status).map((e) => e.uuid).sort();
    expect(heard(viewer)).toEqual([shown.uuid, hidden.uuid].sort());
    expect(heard(admin)).toEqual([shown.uuid, hidden.uuid].sort());
    expect(heard(byProject)).toEqual([shown.uuid]);
    expect(heard(byEnvironment)).toEqual([hidden.uuid]);
    expect(heard(noGrant)).toEqual([]);

    // A grant given while connected counts from the next batch on.
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: bareMember.userId, permission_level: "view_only" }), "grant");
    const next = await report(owner);
    expect(noGrant.resources.filter((e) => e.status === next).map((e) => e.uuid)).toEqual([shown.uuid]);

    // Connectivity of the team's servers reaches every dashboard, grants or not.
    agent.socket.disconnect();
    for (const l of [owner, viewer, byProject, byEnvironment, noGrant]) {
      await until(async () => l.servers.some((e) => e.uuid === w.server.uuid && e.status === "unreachable"));
    }
    agent.socket.connect();
    await agent.hello();
    await until(async () => noGrant.servers.some((e) => e.uuid === w.server.uuid && e.status === "reachable"));
  });
});

describe("/fleet stops streaming when the token stops granting access", () => {
  it("a revoked token, an expired token and a removed member are disconnected at the next batch and hear nothing more", async () => {
    const owner = await listen(w.team.token);
    const revoked = await t.newMember(w.team.teamId, "admin", ["read"]);
    const expired = await t.newMember(w.team.teamId, "admin", ["read"]);
    const removed = await t.newMember(w.team.teamId, "viewer", ["read"]);
    const lr = await listen(revoked.token);
    const le = await listen(expired.token);
    const lm = await listen(removed.token);
    const before = await report(owner);
    for (const l of [lr, le, lm]) expect(l.resources.some((e) => e.status === before)).toBe(true);

    await t.instance.admin.revokeToken(await tokenId(revoked.userId));
    await t.instance.database.prisma.apiToken.update({ where: { id: await tokenId(expired.userId) }, data: { expiresAt: new Date(Date.now() - 1000) } });
    // The membership goes, the token row stays (as when a user leaves by another path).
    await t.instance.database.prisma.membership.deleteMany({ where: { teamId: w.team.teamId, userId: removed.userId } });

    const after = await report(owner);
    for (const l of [lr, le, lm]) {
      await until(async () => l.disconnected.length > 0);
      expect(l.disconnected).toEqual(["io server disconnect"]);
      expect(l.resources.some((e) => e.status === after)).toBe(false);
    }
    expect(owner.socket.connected).toBe(true);
    // And they cannot come back.
    for (const token of [revoked.token, expired.token, removed.token]) await expect(connectFleet(t.url, token)).rejects.toThrow(/Unauthenticated/);
  });

  it("a token without the read scope is refused", async () => {
    const writer = await t.newMember(w.team.teamId, "admin", ["write"]);
    await expect(connectFleet(t.url, writer.token)).rejects.toThrow(/Invalid ability/);
  });
});
