import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppActionPayload } from "@capstan/shared";
import { startTestInstance, type ApiClient, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, connectServerAgent, createImageApp, markDeployed, newServer, ok, placement, type AppWorld } from "./support/applications.js";
import type { ScriptedAgent } from "./support/fake-agent.js";

/**
 * Issue 15, item 2 (domain path takeover): a host belongs to one project; another path under a
 * host in use needs manage on every application serving it; messages never name what the
 * caller cannot see; the proxy gets the ownership table with every job.
 */
let t: TestInstance;
let w: AppWorld;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];

/** The owner's application "victim-app" (project shop, production) serving a1.example.com. */
let victim: { uuid: string };
/** A second project, where the member has full access. */
let other: { uuid: string };
let member: { userId: number; api: ApiClient };

beforeAll(async () => {
  t = await startTestInstance();
  w = await appWorld(t, keys);
  victim = await createImageApp(w, { name: "victim-app", fqdn: "https://a1.example.com" });
  other = await ok(w.api.post("/projects", { name: "side-project" }), "project");
  const m = await t.newMember(w.team.teamId, "member");
  await ok(w.api.post("/permissions/project", { project_uuid: other.uuid, user_id: m.userId, permission_level: "full_access" }), "grant");
  member = { userId: m.userId, api: t.api(m.token) };
});
afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

const inOther = (extra: Record<string, unknown> = {}) => ({ ...placement(w), project_uuid: other.uuid, docker_registry_image_name: "nginx:1.27", ...extra });

describe("a host belongs to one project", () => {
  it("PATCH of a path under another project's host is 409, names nothing hidden, and changes nothing", async () => {
    const mine = await ok(member.api.post("/applications/dockerimage", inOther({ name: "mine" })), "member's app");
    const res = await member.api.patch(`/applications/${mine.uuid}`, { fqdn: "https://a1.example.com/login" });
    expect(res.status, JSON.stringify(res.body)).toBe(409);
    expect(res.body.message).toMatch(/a1\.example\.com/);
    expect(res.body.message).toMatch(/another project/);
    expect(res.body.message).not.toMatch(/victim-app|shop/);
    expect((await member.api.get(`/applications/${mine.uuid}`)).body.fqdn).toBeNull();
  });

  it("create with the host, a path under it, or the host on another server is 409 too", async () => {
    const eu = await newServer(w.api, w.keyUuid, "eu");
    for (const [what, body] of [
      ["same host", inOther({ fqdn: "a1.example.com" })],
      ["a path under it", inOther({ fqdn: "http://A1.example.com/admin" })],
      ["another server", inOther({ server_uuid: eu.uuid, destination_uuid: eu.destinationUuid, fqdn: "https://a1.example.com/api" })],
    ] as const) {
      const res = await member.api.post("/applications/dockerimage", body);
      expect(res.status, what).toBe(409);
      expect(res.body.message, what).not.toMatch(/victim-app/);
    }
    // The owner sees both projects: the message names the application and its project.
    const named = await w.api.post("/applications/dockerimage", inOther({ fqdn: "https://a1.example.com/x" }));
    expect(named.status).toBe(409);
    expect(named.body.message).toMatch(/application victim-app of project shop/);
    // Nothing was created by any of these.
    const listed = (await w.api.get("/applications")).body.data as { fqdn: string | null }[];
    expect(listed.filter((a) => a.fqdn?.includes("a1.example.com"))).toHaveLength(1);
  });

  it("every build pack's create path follows the rule (compose, git, Dockerfile)", async () => {
    const taken = "https://a1.example.com/shop";
    for (const [path, body] of [
      ["/applications/dockercompose", { docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n" }],
      ["/applications/public", { git_repository: "https://github.com/capstan-test/hello-node.git", git_branch: "main", build_pack: "builder_a" }],
      ["/applications/dockerfile", { dockerfile: "FROM nginx:1.27\n" }],
    ] as const) {
      const res = await member.api.post(path, { ...placement(w), project_uuid: other.uuid, ...body, fqdn: taken });
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(409);
      expect(res.body.message, path).not.toMatch(/victim-app/);
    }
  });

  it("a host under the same parent domain that no wildcard covers stays free", async () => {
    const res = await member.api.post("/applications/dockerimage", inOther({ fqdn: "https://b1.example.com" }));
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  });
});

describe("paths under a host inside its project", () => {
  it("need manage on every application serving the host; the owner may add one", async () => {
    // A member with full access on staging only: it sees production's victim (view), may not manage it.
    await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "staging" }), "staging");
    const staging = (await ok(w.api.get(`/projects/${w.project.uuid}/staging`), "env")).id as number;
    const m = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: m.userId, permission_level: "view_only" }), "view");
    await ok(w.api.post("/permissions/environment", { environment_id: staging, user_id: m.userId, permission_level: "full_access" }), "override");
    const api = t.api(m.token);
    const stagingApp = await ok(api.post("/applications/dockerimage", { ...placement(w, "staging"), docker_registry_image_name: "nginx" }), "staging app");
    const res = await api.patch(`/applications/${stagingApp.uuid}`, { fqdn: "https://a1.example.com/login" });
    expect(res.status).toBe(409);
    expect(res.body.message).toMatch(/victim-app, which you may not manage/);

    // Hidden from the caller (no grant on production): the same refusal names nobody.
    const hidden = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/environment", { environment_id: staging, user_id: hidden.userId, permission_level: "full_access" }), "override only");
    const hiddenApi = t.api(hidden.token);
    const hiddenApp = await ok(hiddenApi.post("/applications/dockerimage", { ...placement(w, "staging"), docker_registry_image_name: "nginx" }), "hidden's app");
    const refused = await hiddenApi.patch(`/applications/${hiddenApp.uuid}`, { fqdn: "https://a1.example.com/login" });
    expect(refused.status).toBe(409);
    expect(refused.body.message).not.toMatch(/victim-app/);
    expect(refused.body.message).toMatch(/another resource/);

    // The team owner manages everything: a path under the project's own host is fine.
    expect((await w.api.patch(`/applications/${stagingApp.uuid}`, { fqdn: "https://a1.example.com/login" })).status).toBe(200);
    // The exact host and path stays one application's per server.
    const dup = await w.api.patch(`/applications/${hiddenApp.uuid}`, { fqdn: "https://a1.example.com/login" });
    expect(dup.status).toBe(409);
    expect(dup.body.message).toMatch(/already served by application/);
  });
});

describe("the proxy's ownership table", () => {
  it("every proxy sync job carries who owns which host on the server", async () => {
    const world = await appWorld(t, keys);
    const agent = await connectServerAgent(t, world);
    agents.push(agent);
    const app = await createImageApp(world, { name: "web", fqdn: "https://shop.example.org,https://shop.example.org/api" });
    const side = await ok(world.api.post("/projects", { name: "other" }), "project");
    const api = await ok(world.api.post("/applications/dockerimage", { ...placement(world), project_uuid: side.uuid, docker_registry_image_name: "nginx", fqdn: "https://api.example.org" }), "api");
    await markDeployed(t, app.uuid);
    const started = world.api.post(`/applications/${app.uuid}/stop`);
    const job = await agent.nextJob(10_000);
    expect(job.type).toBe("app.action");
    const ownership = AppActionPayload.parse(job.payload).proxy.ownership!;
    expect(ownership.generation).toBeGreaterThan(Date.now() - 60_000);
    expect(ownership.projects).toEqual(
      expect.arrayContaining([
        { resources: [app.uuid], hosts: ["shop.example.org"] },
        { resources: [api.uuid], hosts: ["api.example.org"] },
      ]),
    );
    expect(ownership.projects).toHaveLength(2);
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { status: "exited" } });
    expect((await started).status).toBe(200);
  });
});
