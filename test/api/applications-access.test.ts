import { createServer, type Server } from "node:http";
import { Writable } from "node:stream";
import { generateKeyPairSync } from "node:crypto";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { client, startTestInstance, type ApiClient, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, createImageApp, markDeployed, ok, placement, type AppWorld } from "./support/applications.js";
import { createInstance, type Instance } from "../../control-plane/src/instance.js";

let t: TestInstance;
let w: AppWorld;
const keys = new KeyFactory();

beforeAll(async () => {
  t = await startTestInstance();
  w = await appWorld(t, keys);
});
afterAll(async () => {
  await t?.close();
  keys.cleanup();
});

const grant = (userId: number, level: string, project = w.project.uuid) =>
  ok(w.api.post("/permissions/project", { project_uuid: project, user_id: userId, permission_level: level }), "grant");
const envId = async (name: string) => (await ok(w.api.get(`/projects/${w.project.uuid}/${name}`), "env")).id as number;

/** Every mutating request on one application, with the permission it needs. */
function mutations(uuid: string): [string, (api: ApiClient) => Promise<{ status: number; body: unknown }>][] {
  return [
    ["patch", (api) => api.patch(`/applications/${uuid}`, { name: "changed" })],
    ["add env", (api) => api.post(`/applications/${uuid}/envs`, { key: "X", value: "1" })],
    ["patch env", (api) => api.patch(`/applications/${uuid}/envs`, { key: "SECRET", value: "2" })],
    ["bulk envs", (api) => api.patch(`/applications/${uuid}/envs/bulk`, { variables: [{ key: "Y", value: "1" }] })],
    ["add storage", (api) => api.post(`/applications/${uuid}/storages`, { name: "v", mount_path: "/v" })],
    ["delete", (api) => api.delete(`/applications/${uuid}`)],
  ];
}

describe("token scopes", () => {
  it("401 without a valid token", async () => {
    const app = await createImageApp(w);
    const anon = t.api();
    for (const res of [
      await anon.get("/applications"),
      await anon.get(`/applications/${app.uuid}`),
      await anon.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx" }),
      await anon.post(`/applications/${app.uuid}/start`),
      await t.api("cap_" + "x".repeat(40)).get(`/applications/${app.uuid}/envs`),
      await anon.get("/github-apps"),
    ]) {
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ message: "Unauthenticated." });
    }
  });

  it("read reads; write creates, changes and deletes; deploy starts, stops and restarts", async () => {
    const app = await createImageApp(w);
    await markDeployed(t, app.uuid);
    const token = async (scopes: ("read" | "write" | "deploy")[]) => t.api((await t.newMember(w.team.teamId, "owner", scopes)).token);
    const read = await token(["read"]);
    const write = await token(["write"]);
    const deploy = await token(["deploy"]);
    const denied = { message: "Invalid ability provided." };

    expect((await read.get("/applications")).status).toBe(200);
    expect((await read.get(`/applications/${app.uuid}`)).status).toBe(200);
    expect((await read.get(`/applications/${app.uuid}/envs`)).status).toBe(200);
    expect((await read.get(`/applications/${app.uuid}/storages`)).status).toBe(200);
    for (const [what, call] of mutations(app.uuid)) {
      const res = await call(read);
      expect(res.status, what).toBe(403);
      expect(res.body, what).toEqual(denied);
    }
    expect((await read.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx" })).status).toBe(403);
    for (const action of ["start", "stop", "restart"]) {
      expect((await read.post(`/applications/${app.uuid}/${action}`)).body, action).toEqual(denied);
      expect((await write.post(`/applications/${app.uuid}/${action}`)).body, action).toEqual(denied);
      // The deploy scope gets through to the application (whose server has no agent here).
      expect((await deploy.post(`/applications/${app.uuid}/${action}`)).status, action).toBe(503);
    }
    expect((await write.get("/applications")).body).toEqual(denied);
    expect((await write.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx" })).status).toBe(201);
    expect((await deploy.patch(`/applications/${app.uuid}`, { name: "x" })).body).toEqual(denied);
    expect((await write.patch(`/applications/${app.uuid}`, { name: "x" })).status).toBe(200);
  });
});

describe("member permissions (project level, environment overrides, viewer role)", () => {
  let prodApp: { uuid: string };
  let stagingApp: { uuid: string };
  beforeAll(async () => {
    await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "staging" }), "staging");
    prodApp = await createImageApp(w, { name: "prod-app" });
    stagingApp = await createImageApp(w, { name: "staging-app", environment_name: "staging" });
    for (const app of [prodApp, stagingApp]) {
      await markDeployed(t, app.uuid);
      await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "SECRET", value: "hunter2" }), "env");
    }
  });

  it("no grant: sees no application and cannot create one (404)", async () => {
    const m = t.api((await t.newMember(w.team.teamId, "member")).token);
    expect((await m.get("/applications")).body).toEqual({ data: [] });
    expect((await m.get("/applications", { page: 1 })).body.meta.total).toBe(0);
    expect((await m.get(`/applications/${prodApp.uuid}`)).status).toBe(404);
    expect((await m.get(`/applications/${prodApp.uuid}/envs`)).status).toBe(404);
    expect((await m.post(`/applications/${prodApp.uuid}/start`)).status).toBe(404);
    const create = await m.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx" });
    expect(create.status).toBe(404);
    expect(create.body).toEqual({ message: "Project not found." });
  });

  it("view_only: reads (values masked), changes nothing, starts nothing", async () => {
    const member = await t.newMember(w.team.teamId, "member");
    await grant(member.userId, "view_only");
    const m = t.api(member.token);
    const list = await m.get("/applications");
    expect(list.body.data.map((a: { uuid: string }) => a.uuid)).toEqual(expect.arrayContaining([prodApp.uuid, stagingApp.uuid]));
    expect((await m.get(`/applications/${prodApp.uuid}`)).status).toBe(200);
    const envs = await m.get(`/applications/${prodApp.uuid}/envs`);
    expect(envs.body.data).toEqual([expect.objectContaining({ key: "SECRET", value: null })]);
    expect(JSON.stringify(envs.body)).not.toContain("hunter2");
    for (const [what, call] of mutations(prodApp.uuid)) expect((await call(m)).status, what).toBe(403);
    for (const action of ["start", "stop", "restart"]) expect((await m.post(`/applications/${prodApp.uuid}/${action}`)).status).toBe(403);
    expect((await m.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx" })).status).toBe(403);
    // logs are a read: allowed (the server has no agent here)
    expect((await m.get(`/applications/${prodApp.uuid}/logs`)).status).toBe(503);
    expect((await w.api.get(`/applications/${prodApp.uuid}`)).body.name).toBe("prod-app");
  });

  it("deploy: may start/stop/restart but not change settings, variables or storages", async () => {
    const member = await t.newMember(w.team.teamId, "member");
    await grant(member.userId, "deploy");
    const m = t.api(member.token);
    for (const action of ["start", "stop", "restart"]) expect((await m.post(`/applications/${prodApp.uuid}/${action}`)).status, action).toBe(503);
    for (const [what, call] of mutations(prodApp.uuid)) expect((await call(m)).status, what).toBe(403);
    expect((await m.get(`/applications/${prodApp.uuid}/envs`)).body.data[0].value).toBeNull();
  });

  it("full_access: everything, values shown; an environment override narrows it for that environment", async () => {
    const member = await t.newMember(w.team.teamId, "member");
    await grant(member.userId, "full_access");
    await ok(w.api.post("/permissions/environment", { environment_id: await envId("staging"), user_id: member.userId, permission_level: "view_only" }), "override");
    const m = t.api(member.token);
    expect((await m.get(`/applications/${prodApp.uuid}/envs`)).body.data[0].value).toBe("hunter2");
    expect((await m.get(`/applications/${stagingApp.uuid}/envs`)).body.data[0].value).toBeNull();
    expect((await m.patch(`/applications/${prodApp.uuid}`, { description: "by member" })).status).toBe(200);
    expect((await m.patch(`/applications/${stagingApp.uuid}`, { description: "by member" })).status).toBe(403);
    expect((await m.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx" })).status).toBe(201);
    const inStaging = await m.post("/applications/dockerimage", { ...placement(w, "staging"), docker_registry_image_name: "nginx" });
    expect(inStaging.status).toBe(403);
  });

  it("an environment override alone shows that environment's applications only", async () => {
    const member = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/environment", { environment_id: await envId("staging"), user_id: member.userId, permission_level: "deploy" }), "override");
    const m = t.api(member.token);
    const uuids = (await m.get("/applications")).body.data.map((a: { uuid: string }) => a.uuid);
    expect(uuids).toContain(stagingApp.uuid);
    expect(uuids).not.toContain(prodApp.uuid);
    expect((await m.get(`/applications/${prodApp.uuid}`)).status).toBe(404);
    expect((await m.post(`/applications/${stagingApp.uuid}/restart`)).status).toBe(503);
  });

  it("viewer role: sees every application, values masked, changes nothing", async () => {
    const viewer = await t.newMember(w.team.teamId, "viewer");
    await grant(viewer.userId, "full_access");
    const v = t.api(viewer.token);
    expect((await v.get("/applications")).body.data.length).toBeGreaterThanOrEqual(2);
    expect((await v.get(`/applications/${prodApp.uuid}/envs`)).body.data[0].value).toBeNull();
    for (const [what, call] of mutations(prodApp.uuid)) expect((await call(v)).status, what).toBe(403);
  });
});

describe("secrets never reach the logs", () => {
  let logged: Instance;
  let server: Server;
  const lines: string[] = [];
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(...String(chunk).split("\n").filter(Boolean));
        cb();
      },
    });
    logged = await createInstance(t.config, pino({ level: "trace" }, sink));
    server = createServer(logged.app);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  });
  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    await logged?.close();
  });

  it("env values, git app keys and webhook secrets are in no log line", async () => {
    const addr = server.address();
    const api = client(`http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}/api/v1`, w.team.token);
    const value = "env-secret-" + Math.random().toString(36).slice(2);
    const app = await ok(api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx" }), "app");
    await ok(api.post(`/applications/${app.uuid}/envs`, { key: "TOKEN", value }), "env");
    await ok(api.patch(`/applications/${app.uuid}/envs`, { key: "TOKEN", value: value + "-2" }), "patch");
    await ok(api.patch(`/applications/${app.uuid}/envs/bulk`, { variables: [{ key: "TOKEN", value: value + "-3" }] }), "bulk");
    expect((await api.post(`/applications/${app.uuid}/envs`, { key: "BAD KEY", value })).status).toBe(422);
    await ok(api.get(`/applications/${app.uuid}/envs`), "list");
    const pem = generateKeyPairSync("rsa", { modulusLength: 2048, privateKeyEncoding: { type: "pkcs1", format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } }).privateKey;
    await ok(api.post("/github-apps", { name: "logged", app_id: 1, installation_id: 1, private_key: pem, webhook_secret: "whsec-" + value }), "git app");
    expect((await api.post("/github-apps", { name: "bad", app_id: 1, installation_id: 1, private_key: pem.replace("RSA PRIVATE", "RSA PUBLIC") })).status).toBe(422);

    await vi.waitFor(() => expect(lines.filter((l) => l.includes('"statusCode"')).length).toBeGreaterThanOrEqual(8));
    const all = lines.join("\n");
    expect(all).toContain("/api/v1/applications/");
    expect(all).not.toContain(value);
    expect(all).not.toContain("PRIVATE KEY");
    expect(all).not.toContain(pem.split("\n")[5]!);
  });
});
