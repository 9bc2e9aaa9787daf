import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type ApiClient, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { connectedWorld, createImageApp, ok, placement, type AppWorld } from "./support/applications.js";
import { createDb } from "./support/standalone-databases.js";

/**
 * Issue 15, item 3 (permission leaks inside a team): server-wide lists show only resources of
 * projects the caller may see, and 409 messages name another resource only when the caller may
 * see it.
 */
let t: TestInstance;
let w: AppWorld;
let agent: ScriptedAgent;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];
let member: ApiClient;
let hidden: { app: { uuid: string }; db: { uuid: string } };
let mine: { app: { uuid: string }; db: { uuid: string } };

const labelled = (uuid: string, name: string, type: string, domains = "") => ({
  "capstan.managed": "true",
  "capstan.resource.uuid": uuid,
  "capstan.resource.name": name,
  "capstan.resource.type": type,
  "capstan.domains": domains,
  ...(type === "database" ? { "capstan.database.engine": "postgresql" } : {}),
});

beforeAll(async () => {
  t = await startTestInstance();
  ({ w, agent } = await connectedWorld(t, keys, agents));
  const other = await ok(w.api.post("/projects", { name: "side" }), "project");
  const m = await t.newMember(w.team.teamId, "member");
  await ok(w.api.post("/permissions/project", { project_uuid: other.uuid, user_id: m.userId, permission_level: "full_access" }), "grant");
  member = t.api(m.token);
  hidden = { app: await createImageApp(w, { name: "secret-app", fqdn: "https://secret.example.com" }), db: await createDb(w, "postgresql", { name: "secret-db", is_public: true, public_port: 15432 }) };
  const inSide = { ...placement(w), project_uuid: other.uuid };
  mine = {
    app: await ok(member.post("/applications/dockerimage", { ...inSide, docker_registry_image_name: "nginx", name: "my-app", fqdn: "https://mine.example.com" }), "app"),
    db: await ok(member.post("/databases/postgresql", { ...inSide, instant_deploy: false, name: "my-db" }), "db"),
  };
  const containers = [
    { id: "c1", name: "secret-app-1", image: "nginx", status: "running:healthy", labels: labelled(hidden.app.uuid, "secret-app", "application", "secret.example.com") },
    { id: "c2", name: hidden.db.uuid, image: "postgres", status: "running:healthy", labels: labelled(hidden.db.uuid, "secret-db", "database") },
    { id: "c3", name: "my-app-1", image: "nginx", status: "running:healthy", labels: labelled(mine.app.uuid, "my-app", "application", "mine.example.com") },
    { id: "c4", name: mine.db.uuid, image: "postgres", status: "exited", labels: labelled(mine.db.uuid, "my-db", "database") },
    // Left behind by a deleted resource: no record says whose it was.
    { id: "c5", name: "orphan-1", image: "nginx", status: "running:unknown", labels: labelled("gone-uuid", "orphan", "application", "orphan.example.com") },
  ];
  agent.serve("containers.list", () => ({ ok: true, result: { containers } }));
});
afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

describe("server-wide lists follow the caller's visibility", () => {
  it("GET /servers/{uuid}/resources lists only resources of projects the member may see", async () => {
    const res = await member.get(`/servers/${w.server.uuid}/resources`);
    expect(res.status).toBe(200);
    expect(res.body.data.map((r: { name: string }) => r.name).sort()).toEqual(["my-app", "my-db"]);
    expect(JSON.stringify(res.body)).not.toMatch(/secret|orphan/);
    // The owner sees the whole team's; a container no record explains is no resource of the
    // server (the list comes from the stored records: services/server-resources.ts).
    const all = await w.api.get(`/servers/${w.server.uuid}/resources`);
    expect(all.body.data.map((r: { name: string }) => r.name).sort()).toEqual(["my-app", "my-db", "secret-app", "secret-db"]);
    const paged = await member.get(`/servers/${w.server.uuid}/resources`, { page: 1, per_page: 10 });
    expect(paged.body.meta.total).toBe(2);
  });

  it("GET /servers/{uuid}/domains lists only domains of resources the member may see", async () => {
    const res = await member.get(`/servers/${w.server.uuid}/domains`);
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(1);
    expect(res.body.data[0]).toMatchObject({ domain: "mine.example.com", resource_uuid: mine.app.uuid, resource_name: "my-app", resource_type: "application" });
    const all = await w.api.get(`/servers/${w.server.uuid}/domains`);
    expect(all.body.data.map((d: { domain: string }) => d.domain).sort()).toEqual(["mine.example.com", "secret.example.com"]);
  });

  it("a viewer sees the whole team, as it does in /applications", async () => {
    const viewer = t.api((await t.newMember(w.team.teamId, "viewer")).token);
    expect((await viewer.get(`/servers/${w.server.uuid}/resources`)).body.data).toHaveLength(4);
  });
});

describe("409 messages name only what the caller may see", () => {
  it("a public port taken by a hidden database: neutral; by a visible one: named", async () => {
    const res = await member.patch(`/databases/${mine.db.uuid}`, { is_public: true, public_port: 15432 });
    expect(res.status).toBe(409);
    expect(res.body.message).toMatch(/15432/);
    expect(res.body.message).not.toMatch(/secret-db/);
    expect(res.body.message).toMatch(/another database/);
    const created = await member.post("/databases/redis", { ...placement(w), project_uuid: (await ok(member.get(`/applications/${mine.app.uuid}`), "app")).project_uuid, instant_deploy: false, is_public: true, public_port: 15432 });
    expect(created.status).toBe(409);
    expect(created.body.message).not.toMatch(/secret-db/);
    // The owner sees it: the message names it.
    const owner = await w.api.patch(`/databases/${mine.db.uuid}`, { is_public: true, public_port: 15432 });
    expect(owner.status).toBe(409);
    expect(owner.body.message).toMatch(/database secret-db/);
  });

  it("a domain served by a hidden application: neutral", async () => {
    const res = await member.patch(`/applications/${mine.app.uuid}`, { fqdn: "https://secret.example.com" });
    expect(res.status).toBe(409);
    expect(res.body.message).not.toMatch(/secret-app/);
  });
});
