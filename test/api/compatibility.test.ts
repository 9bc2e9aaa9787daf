/**
 * Clients written for Coolify's v4 API (docs/compatibility.md): every alias driven the way such
 * a client sends it, with the request shapes of Coolify's openapi.yaml (its methods, paths,
 * field names and values), against a real control plane. Each form must do what Capstan's own
 * form does, and never weaken a rule of the spec: scopes, permissions, validation, and another
 * team's object is a 404 (also covered for every route by cross-team.test.ts,
 * authz-matrix.test.ts and fuzz.test.ts, which the aliases join through the route table).
 */
import { describe, expect, it } from "vitest";
import type { ApiClient, TestInstance } from "./harness.js";
import { lifecycleFile } from "./support/lifecycle.js";
import { answerNext, appWorld, createImageApp, markDeployed, ok, placement, type AppWorld } from "./support/applications.js";
import { answerJob, createDb, deployed } from "./support/standalone-databases.js";
import { gitAppKey } from "./support/fixtures.js";

let t: TestInstance;
const { keys, prisma, connectedWorld: newConnectedWorld } = lifecycleFile((started) => (t = started));

const deploymentsOf = async (appUuid: string) =>
  prisma().deployment.findMany({ where: { application: { uuid: appUuid } }, orderBy: { id: "asc" }, select: { uuid: true, status: true, force: true, trigger: true } });
const jobCount = () => prisma().job.count();
const NO_SCOPE = { message: "Invalid ability provided." };

/** A member of the world's team with a role and token scopes. */
async function memberApi(w: AppWorld, role: "admin" | "member" | "viewer", scopes: ("read" | "write" | "deploy")[]): Promise<ApiClient> {
  const m = await t.newMember(w.team.teamId, role, scopes);
  return t.api(m.token);
}

/** A HEAD request (the client's fetch): status only. */
async function head(api: ApiClient, path: string): Promise<number> {
  return (await api.raw(path, { method: "HEAD" })).status;
}

// The body of Coolify's POST /applications/public, as its clients send it (openapi.yaml): its
// build pack names, ports as a string, domains, instant_deploy and use_build_server.
const coolifyPublicApp = (w: AppWorld, extra: Record<string, unknown> = {}) => ({
  ...placement(w),
  git_repository: "https://github.com/acme/shop.git",
  git_branch: "main",
  build_pack: "nixpacks",
  ports_exposes: "3000",
  name: "shop",
  description: "created by a Coolify client",
  domains: "https://shop.example.com",
  git_commit_sha: "HEAD",
  health_check_enabled: true,
  health_check_path: "/health",
  health_check_port: "3000",
  instant_deploy: false,
  use_build_server: false,
  ...extra,
});

describe("GET as well as POST on start, stop and restart (Coolify accepts both)", () => {
  it("the GET forms of an application's actions run the same agent jobs and answer the same", async () => {
    const { w, agent } = await newConnectedWorld();
    const app = await createImageApp(w, { name: "web" });
    await markDeployed(t, app.uuid);
    for (const [action, status, words] of [
      ["start", "running:healthy", "started"],
      ["restart", "running:starting", "restarted"],
      ["stop", "exited", "stopped"],
    ] as const) {
      const pending = w.api.get(`/applications/${app.uuid}/${action}`);
      const job = await answerNext(agent, "app.action", { result: { status } });
      expect(job.payload).toMatchObject({ app: { uuid: app.uuid, name: "web" }, action });
      const res = await pending;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toEqual({ message: `Application ${words}.`, status });
    }
    expect((await w.api.get(`/applications/${app.uuid}`)).body.status).toBe("exited");
  });

  it("the GET forms of a database's actions run the same agent jobs and answer the same", async () => {
    const { w, agent } = await newConnectedWorld();
    const db = await createDb(w);
    const starting = w.api.get(`/databases/${db.uuid}/start`);
    await answerJob(agent, "db.deploy", deployed(db.uuid));
    expect((await starting).body).toEqual({ message: "Database started.", status: "running:healthy" });
    const stopping = w.api.get(`/databases/${db.uuid}/stop`);
    expect((await answerJob(agent, "db.action", { result: { status: "exited" } })).payload).toMatchObject({ action: "stop" });
    expect((await stopping).body).toEqual({ message: "Database stopped.", status: "exited" });
    const restarting = w.api.get(`/databases/${db.uuid}/restart`);
    await answerJob(agent, "db.deploy", deployed(db.uuid));
    expect((await restarting).status).toBe(200);
  });

  it("a GET that changes state needs the deploy scope and permission (never read), and a HEAD does nothing", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    const db = await createDb(w);
    const readOnly = await memberApi(w, "admin", ["read"]);
    const readWrite = await memberApi(w, "admin", ["read", "write"]);
    const viewer = await memberApi(w, "viewer", ["read", "deploy"]);
    const stranger = (await t.newTeam()).api;
    const before = { jobs: await jobCount(), deployments: await deploymentsOf(app.uuid) };
    for (const path of [`/applications/${app.uuid}`, `/databases/${db.uuid}`]) {
      for (const action of ["start", "stop", "restart"]) {
        for (const api of [readOnly, readWrite]) {
          const res = await api.get(`${path}/${action}`);
          expect(res.status, `${path}/${action}`).toBe(403);
          expect(res.body).toEqual(NO_SCOPE);
        }
        // The spec's permission rules: visible without deploy is 403, another team's is 404.
        expect((await viewer.get(`${path}/${action}`)).status).toBe(403);
        expect((await stranger.get(`${path}/${action}`)).status).toBe(404);
        expect(await head(w.api, `${path}/${action}`)).toBe(400);
      }
    }
    expect(await jobCount()).toBe(before.jobs);
    expect(await deploymentsOf(app.uuid)).toEqual(before.deployments);
    // The owner's GET does act (the application was never deployed: start deploys it).
    expect((await w.api.get(`/applications/${app.uuid}/start`)).status).toBe(200);
    expect(await deploymentsOf(app.uuid)).toHaveLength(1);
  });
});

describe("start of a never-deployed application deploys it (what start means to its users)", () => {
  it("POST start queues a deployment and answers its uuid; a second start while it is queued is a 409", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    const res = await w.api.post(`/applications/${app.uuid}/start`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ message: expect.stringMatching(/never been deployed/), status: "exited", deployment_uuid: expect.any(String) });
    const detail = await w.api.get(`/deployments/${res.body.deployment_uuid}`);
    expect(detail.body).toMatchObject({ application_uuid: app.uuid, status: "queued", trigger: "api", force: false });
    const again = await w.api.get(`/applications/${app.uuid}/start`);
    expect(again.status).toBe(409);
    expect(again.body.message).toMatch(/deployment queued or in progress/);
    expect(await deploymentsOf(app.uuid)).toHaveLength(1);
  });

  it("Coolify's start?force=true deploys without the build cache even when deployed; instant_deploy is accepted and ignored", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    await markDeployed(t, app.uuid);
    const res = await w.api.get(`/applications/${app.uuid}/start`, { force: "true", instant_deploy: "true" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.deployment_uuid).toEqual(expect.any(String));
    expect((await w.api.get(`/deployments/${res.body.deployment_uuid}`)).body.force).toBe(true);
    const bad = await w.api.get(`/applications/${app.uuid}/start`, { force: "maybe" });
    expect(bad.status).toBe(422);
    expect(Object.keys(bad.body.errors)).toEqual(["force"]);
  });

  it("start of a deployed application still starts its containers; restart of a never-deployed one is still a 409", async () => {
    const { w, agent } = await newConnectedWorld();
    const app = await createImageApp(w);
    expect((await w.api.post(`/applications/${app.uuid}/restart`)).status).toBe(409);
    await markDeployed(t, app.uuid);
    const starting = w.api.post(`/applications/${app.uuid}/start`);
    await answerNext(agent, "app.action", { result: { status: "running:healthy" } });
    expect((await starting).body).toEqual({ message: "Application started.", status: "running:healthy" });
  });
});

describe("GET|POST /deploy?uuid=&force= (Coolify's deploy by uuid)", () => {
  it("deploys each application of a comma-separated list, in the query of a GET", async () => {
    const w = await appWorld(t, keys);
    const a = await createImageApp(w, { name: "a" });
    const b = await createImageApp(w, { name: "b" });
    const res = await w.api.get("/deploy", { uuid: `${a.uuid},${b.uuid},${a.uuid}`, force: "true" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      deployments: [
        { message: "Application a deployment queued.", resource_uuid: a.uuid, deployment_uuid: expect.any(String) },
        { message: "Application b deployment queued.", resource_uuid: b.uuid, deployment_uuid: expect.any(String) },
      ],
    });
    for (const [app, item] of [[a, res.body.deployments[0]], [b, res.body.deployments[1]]] as const) {
      expect(await deploymentsOf(app.uuid)).toEqual([{ uuid: item.deployment_uuid, status: "queued", force: true, trigger: "api" }]);
    }
  });

  it("POST takes the parameters in the query string or a JSON body (both: the same values)", async () => {
    const w = await appWorld(t, keys);
    const a = await createImageApp(w);
    expect((await w.api.post(`/deploy?uuid=${a.uuid}`)).status).toBe(200);
    expect((await w.api.post("/deploy", { uuid: a.uuid, force: false })).status).toBe(200);
    expect((await w.api.post(`/deploy?uuid=${a.uuid}&force=true`, { uuid: a.uuid, force: true })).status).toBe(200);
    const clash = await w.api.post(`/deploy?force=true`, { uuid: a.uuid, force: false });
    expect(clash.status).toBe(422);
    expect(Object.keys(clash.body.errors)).toEqual(["force"]);
    expect((await deploymentsOf(a.uuid)).map((d) => d.force)).toEqual([false, false, true]);
  });

  it("starts the databases it names (no deployment uuid); a resource refused on the way is reported and the others go on", async () => {
    const { w, agent } = await newConnectedWorld();
    const app = await createImageApp(w, { name: "api" });
    const db = await createDb(w, "postgresql", { name: "pg" });
    const pending = w.api.get("/deploy", { uuid: `${db.uuid},${app.uuid}` });
    await answerJob(agent, "db.deploy", deployed(db.uuid));
    const res = await pending;
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.deployments).toEqual([
      { message: "Database pg started.", resource_uuid: db.uuid },
      { message: "Application api deployment queued.", resource_uuid: app.uuid, deployment_uuid: expect.any(String) },
    ]);
  });

  it("a database whose agent is away is reported in its item; the application after it is still deployed", async () => {
    const w = await appWorld(t, keys);
    const db = await createDb(w, "postgresql", { name: "pg" });
    const app = await createImageApp(w, { name: "api" });
    const res = await w.api.post("/deploy", { uuid: `${db.uuid},${app.uuid}` });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.deployments[0]).toEqual({ message: expect.stringMatching(/^Database pg not started: .*agent is not connected/), resource_uuid: db.uuid });
    expect(res.body.deployments[1]).toMatchObject({ resource_uuid: app.uuid, deployment_uuid: expect.any(String) });
  });

  it("every uuid is checked first: another team's, an unknown one or a hidden one is a 404 and nothing is deployed", async () => {
    const w = await appWorld(t, keys);
    const mine = await createImageApp(w);
    const theirs = await createImageApp(await appWorld(t, keys));
    const member = await memberApi(w, "member", ["read", "write", "deploy"]);
    const before = await jobCount();
    for (const [api, uuid] of [
      [w.api, `${mine.uuid},${theirs.uuid}`],
      [w.api, `${mine.uuid},no-such-uuid`],
      // A member without a grant does not see the project: the same 404, nothing named.
      [member, mine.uuid],
    ] as const) {
      for (const res of [await api.get("/deploy", { uuid }), await api.post("/deploy", { uuid })]) {
        expect(res.status, uuid).toBe(404);
        expect(JSON.stringify(res.body)).not.toContain(theirs.uuid);
      }
    }
    expect(await deploymentsOf(mine.uuid)).toEqual([]);
    expect(await deploymentsOf(theirs.uuid)).toEqual([]);
    expect(await jobCount()).toBe(before);
  });

  it("needs the deploy scope (the GET too) and the deploy permission on each resource", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    const viewer = await memberApi(w, "viewer", ["read", "deploy"]);
    for (const api of [await memberApi(w, "admin", ["read"]), await memberApi(w, "admin", ["read", "write"])]) {
      expect((await api.get("/deploy", { uuid: app.uuid })).body).toEqual(NO_SCOPE);
      expect((await api.post("/deploy", { uuid: app.uuid })).status).toBe(403);
    }
    expect((await viewer.get("/deploy", { uuid: app.uuid })).status).toBe(403);
    expect(await head(w.api, `/deploy?uuid=${app.uuid}`)).toBe(400);
    expect(await deploymentsOf(app.uuid)).toEqual([]);
  });

  it("tag (deploy by tag) is refused by name: resources carry no tags here; so are pr previews and missing or too many uuids", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    const cases: [Record<string, string>, string][] = [
      [{ tag: "production" }, "tag"],
      [{ tag: "production", uuid: app.uuid }, "tag"],
      [{}, "uuid"],
      [{ uuid: " , ," }, "uuid"],
      [{ uuid: app.uuid, pr: "12" }, "pr"],
      [{ uuid: Array.from({ length: 51 }, (_, i) => `u${i}`).join(",") }, "uuid"],
    ];
    for (const [query, field] of cases) {
      const res = await w.api.get("/deploy", query);
      expect(res.status, JSON.stringify(query)).toBe(422);
      expect(Object.keys(res.body.errors), JSON.stringify(query)).toEqual([field]);
    }
    expect((await w.api.get("/deploy", { tag: "production" })).body.errors.tag[0]).toMatch(/not available: resources carry no tags/);
    expect((await w.api.post("/deploy", { tag: "production" })).status).toBe(422);
    expect((await w.api.post("/deploy", { uuid: app.uuid, pr: 0 })).status).toBe(200);
    expect(await deploymentsOf(app.uuid)).toHaveLength(1);
  });

  it("a full deploy queue answers 429 with Retry-After, as the single deploy does", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    const settings = t.instance.services.deployments.settings;
    const limit = settings.queueLimit;
    settings.queueLimit = 0;
    try {
      const res = await w.api.get("/deploy", { uuid: app.uuid });
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toBe("30");
    } finally {
      settings.queueLimit = limit;
    }
  });
});

describe("instant_deploy on create and change", () => {
  it("queues the first deployment with the create; without the token's deploy scope it is a 403 and nothing is created", async () => {
    const w = await appWorld(t, keys);
    const created = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx:1.27", ports_exposes: "80", instant_deploy: true });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toEqual({ uuid: expect.any(String), name: "nginx", fqdn: null, deployment_uuid: expect.any(String), message: "Deployment queued." });
    expect(await deploymentsOf(created.body.uuid)).toEqual([{ uuid: created.body.deployment_uuid, status: "queued", force: false, trigger: "api" }]);

    const writer = await memberApi(w, "admin", ["read", "write"]);
    const apps = await prisma().application.count();
    const refused = await writer.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx:1.27", instant_deploy: true });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual(NO_SCOPE);
    expect(await prisma().application.count()).toBe(apps);
    // Without instant_deploy the same token creates, and nothing is deployed.
    const plain = await writer.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx:1.27", instant_deploy: false });
    expect(plain.status).toBe(201);
    expect(plain.body).toEqual({ uuid: expect.any(String), name: "nginx", fqdn: null });
    expect(await deploymentsOf(plain.body.uuid)).toEqual([]);
  });

  it("a refused deployment does not undo the create: 201 with deployment_uuid null and the reason", async () => {
    const w = await appWorld(t, keys);
    const settings = t.instance.services.deployments.settings;
    const limit = settings.queueLimit;
    settings.queueLimit = 0;
    try {
      const res = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx:1.27", instant_deploy: true });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ deployment_uuid: null, message: expect.stringMatching(/^Not deployed: The deploy queue .* is full/) });
      expect((await w.api.get(`/applications/${res.body.uuid}`)).status).toBe(200);
    } finally {
      settings.queueLimit = limit;
    }
  });

  it("PATCH with instant_deploy deploys the new settings (deploy scope needed too); instant_deploy alone changes nothing", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    const res = await w.api.patch(`/applications/${app.uuid}`, { docker_registry_image_tag: "1.28", instant_deploy: true });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ message: "Application updated. Deployment queued.", deployment_uuid: expect.any(String), data: { docker_registry_image_name: "nginx:1.28" } });
    const writer = await memberApi(w, "admin", ["read", "write"]);
    expect((await writer.patch(`/applications/${app.uuid}`, { name: "renamed", instant_deploy: true })).status).toBe(403);
    expect((await w.api.get(`/applications/${app.uuid}`)).body.name).not.toBe("renamed");
    const alone = await w.api.patch(`/applications/${app.uuid}`, { instant_deploy: true });
    expect(alone.status).toBe(422);
    expect(await deploymentsOf(app.uuid)).toHaveLength(1);
  });
});

describe("Coolify's create paths, fields and values", () => {
  it("POST /applications/private-github-app with github_app_uuid creates what private-git-app does; another team's git app is a 404", async () => {
    const w = await appWorld(t, keys);
    const gitApp = await ok(w.api.post("/github-apps", { name: "gh", app_id: 7, installation_id: 8, private_key: gitAppKey }), "git app");
    const body = { ...placement(w), github_app_uuid: gitApp.uuid, git_repository: "acme/private", git_branch: "main", build_pack: "static", ports_exposes: "80" };
    const res = await w.api.post("/applications/private-github-app", body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect((await w.api.get(`/applications/${res.body.uuid}`)).body).toMatchObject({
      source: "private_git_app",
      git_app_uuid: gitApp.uuid,
      git_repository: "https://github.com/acme/private.git",
      build_pack: "builder_b",
    });
    const stranger = await appWorld(t, keys);
    const foreign = await stranger.api.post("/applications/private-github-app", { ...body, ...placement(stranger) });
    expect(foreign.status).toBe(404);
    // Capstan's own field name is not taken on Coolify's path (one name per path).
    expect((await w.api.post("/applications/private-github-app", { ...body, github_app_uuid: undefined, git_app_uuid: gitApp.uuid })).status).toBe(422);
  });

  it("takes a create body as Coolify's clients send it: build pack names, ports as strings, git_commit_sha HEAD, use_build_server", async () => {
    const w = await appWorld(t, keys);
    const res = await w.api.post("/applications/public", coolifyPublicApp(w));
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect((await w.api.get(`/applications/${res.body.uuid}`)).body).toMatchObject({
      build_pack: "builder_a",
      ports_exposes: "3000",
      fqdn: "https://shop.example.com",
      health_check_port: 3000,
      health_check_path: "/health",
    });
    for (const [build_pack, stored] of [["static", "builder_b"], ["dockerfile", "containerfile"], ["builder_c", "builder_c"]]) {
      const r = await w.api.post("/applications/public", coolifyPublicApp(w, { build_pack, domains: "" }));
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      expect((await w.api.get(`/applications/${r.body.uuid}`)).body.build_pack).toBe(stored);
    }
    const dockerfile = await w.api.post("/applications/dockerfile", { ...placement(w), dockerfile: "FROM nginx:1.27\n", build_pack: "dockerfile" });
    expect(dockerfile.status, JSON.stringify(dockerfile.body)).toBe(201);
    const compose = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n", build_pack: "dockercompose" });
    expect(compose.status, JSON.stringify(compose.body)).toBe(201);
    const patched = await w.api.patch(`/applications/${res.body.uuid}`, { build_pack: "static", use_build_server: true, git_commit_sha: "HEAD" });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.data.build_pack).toBe("builder_b");
  });

  it("refuses what it cannot honour by name: a compose file from a repository, another commit, Coolify-only settings", async () => {
    const w = await appWorld(t, keys);
    const before = await prisma().application.count();
    const cases: [Record<string, unknown>, string][] = [
      [{ build_pack: "dockercompose" }, "build_pack"],
      [{ git_commit_sha: "4f2c9a1" }, "git_commit_sha"],
      [{ custom_docker_run_options: "--privileged" }, "custom_docker_run_options"],
      [{ is_http_basic_auth_enabled: true }, "is_http_basic_auth_enabled"],
      [{ health_check_port: "30a" }, "health_check_port"],
    ];
    for (const [extra, field] of cases) {
      const res = await w.api.post("/applications/public", coolifyPublicApp(w, extra));
      expect(res.status, JSON.stringify(extra)).toBe(422);
      expect(Object.keys(res.body.errors), JSON.stringify(extra)).toEqual([field]);
    }
    expect((await w.api.post("/applications/dockerfile", { ...placement(w), dockerfile: "FROM nginx\n", build_pack: "nixpacks" })).status).toBe(422);
    expect(await prisma().application.count()).toBe(before);
  });
});

describe("environment variables in Coolify's forms", () => {
  it("create with Coolify's flags: is_buildtime is is_build_time, is_literal/is_multiline are ignored; the uuid is at the top", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    const res = await w.api.post(`/applications/${app.uuid}/envs`, {
      key: "API_URL",
      value: "https://api.example.com/$PATH",
      is_preview: false,
      is_buildtime: true,
      is_runtime: true,
      is_literal: true,
      is_multiline: false,
      is_shown_once: false,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.uuid).toBe(res.body.data.uuid);
    expect(res.body.data).toMatchObject({ key: "API_URL", is_build_time: true, is_preview: false });
    // The value is stored as given: literal, whatever is_literal said.
    expect((await w.api.get(`/applications/${app.uuid}/envs`)).body.data[0].value).toBe("https://api.example.com/$PATH");
    expect((await w.api.delete(`/applications/${app.uuid}/envs/${res.body.uuid}`)).status).toBe(200);
  });

  it("refuses the flags Capstan cannot honour, and two names of one flag that disagree", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    const cases: [Record<string, unknown>, string][] = [
      [{ is_runtime: false }, "is_runtime"],
      [{ is_shown_once: true }, "is_shown_once"],
      [{ is_build_time: true, is_buildtime: false }, "is_buildtime"],
      [{ is_literal: true, is_secret: true }, "is_secret"],
    ];
    for (const [extra, field] of cases) {
      const res = await w.api.post(`/applications/${app.uuid}/envs`, { key: "K", value: "v", ...extra });
      expect(res.status, JSON.stringify(extra)).toBe(422);
      expect(Object.keys(res.body.errors), JSON.stringify(res.body)).toEqual([field]);
    }
    expect((await w.api.get(`/applications/${app.uuid}/envs`)).body.data).toEqual([]);
  });

  it("PATCH .../envs by key with is_buildtime; PATCH .../envs/bulk with Coolify's data list", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "NODE_ENV", value: "development" }), "env");
    const patched = await w.api.patch(`/applications/${app.uuid}/envs`, { key: "NODE_ENV", value: "production", is_buildtime: true, is_literal: false, is_multiline: false });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.data).toMatchObject({ key: "NODE_ENV", is_build_time: true });
    const bulk = await w.api.patch(`/applications/${app.uuid}/envs/bulk`, {
      data: [
        { key: "NODE_ENV", value: "staging", is_preview: false, is_literal: true, is_multiline: false, is_shown_once: false },
        { key: "CERT", value: "-----BEGIN-----\nabc\n-----END-----", is_buildtime: false, is_multiline: true },
      ],
    });
    expect(bulk.status, JSON.stringify(bulk.body)).toBe(200);
    const list = (await w.api.get(`/applications/${app.uuid}/envs`)).body.data.map((e: any) => [e.key, e.value, e.is_build_time]);
    expect(list).toEqual([
      ["NODE_ENV", "staging", true],
      ["CERT", "-----BEGIN-----\nabc\n-----END-----", false],
    ]);
    for (const [body, field] of [
      [{ data: [{ key: "A", value: "1" }], variables: [{ key: "A", value: "1" }] }, "data"],
      [{}, "variables"],
      [{ data: [{ key: "A", value: "1" }, { key: "A", value: "2" }] }, "data.1.key"],
      [{ data: [{ key: "A", value: "1", is_required: true }] }, "data.0.is_required"],
      [{ data: [{ key: "A", value: "1", is_runtime: false }] }, "data.0.is_runtime"],
    ] as const) {
      const res = await w.api.patch(`/applications/${app.uuid}/envs/bulk`, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(Object.keys(res.body.errors), JSON.stringify(res.body)).toEqual([field]);
    }
    expect((await w.api.get(`/applications/${app.uuid}/envs`)).body.data).toHaveLength(2);
  });

  it("a database's variables: Coolify's flags, PATCH .../envs by key, bulk as data; the uuid at the top", async () => {
    const w = await appWorld(t, keys);
    const db = await createDb(w);
    const created = await w.api.post(`/databases/${db.uuid}/envs`, { key: "PGTZ", value: "UTC", is_literal: true, is_multiline: false, is_shown_once: false });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.uuid).toBe(created.body.data.uuid);
    const patched = await w.api.patch(`/databases/${db.uuid}/envs`, { key: "PGTZ", value: "Europe/Paris", is_literal: true });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toEqual({ message: "Environment variable updated.", data: expect.objectContaining({ uuid: created.body.uuid, key: "PGTZ" }) });
    expect((await w.api.patch(`/databases/${db.uuid}/envs`, { key: "MISSING", value: "x" })).status).toBe(404);
    expect((await w.api.patch(`/databases/${db.uuid}/envs`, { key: "PGTZ", value: "x", is_shown_once: true })).status).toBe(422);
    const bulk = await w.api.patch(`/databases/${db.uuid}/envs/bulk`, { data: [{ key: "PGTZ", value: "CET", is_literal: false }, { key: "LANG", value: "C.UTF-8" }] });
    expect(bulk.status, JSON.stringify(bulk.body)).toBe(200);
    expect((await w.api.get(`/databases/${db.uuid}/envs`)).body.data.map((e: any) => [e.key, e.value])).toEqual([
      ["PGTZ", "CET"],
      ["LANG", "C.UTF-8"],
    ]);
    // Another team's database: 404, nothing changed.
    const stranger = (await t.newTeam()).api;
    expect((await stranger.patch(`/databases/${db.uuid}/envs`, { key: "PGTZ", value: "hijacked" })).status).toBe(404);
    expect((await w.api.get(`/databases/${db.uuid}/envs`)).body.data[0].value).toBe("CET");
  });
});

describe("storages, logs, deployments and servers in Coolify's forms", () => {
  it("a storage of type persistent is a volume or a bind mount, with its uuid at the top; type file is refused", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    const res = await w.api.post(`/applications/${app.uuid}/storages`, { type: "persistent", name: "data", mount_path: "/data" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ uuid: res.body.data.uuid, data: { name: "data", type: "volume" } });
    const file = await w.api.post(`/applications/${app.uuid}/storages`, { type: "file", mount_path: "/etc/app.conf", content: "x" });
    expect(file.status).toBe(422);
    // type file is refused by name, as are the fields only file storages have.
    expect(Object.keys(file.body.errors).sort()).toEqual(["content", "name", "type"]);
    expect(file.body.errors.type[0]).toMatch(/file storages are not/);
    expect((await w.api.get(`/applications/${app.uuid}/storages`)).body.data).toHaveLength(1);
  });

  it("logs take Coolify's lines for tail", async () => {
    const { w, agent } = await newConnectedWorld();
    const app = await createImageApp(w);
    const pending = w.api.get(`/applications/${app.uuid}/logs`, { lines: 50 });
    const job = await answerNext(agent, "app.logs", { result: { container: "c", lines: ["a"], truncated: false } });
    expect(job.payload).toMatchObject({ tail: 50 });
    expect((await pending).status).toBe(200);
    const clash = await w.api.get(`/applications/${app.uuid}/logs`, { lines: 50, tail: 20 });
    expect(clash.status).toBe(422);
    expect(Object.keys(clash.body.errors)).toEqual(["lines"]);
  });

  it("an application's deployments take Coolify's skip/take window", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    for (let i = 0; i < 5; i++) await markDeployed(t, app.uuid);
    const all = (await w.api.get(`/deployments/applications/${app.uuid}`)).body.data.map((d: any) => d.uuid);
    const res = await w.api.get(`/deployments/applications/${app.uuid}`, { skip: 1, take: 2 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [expect.objectContaining({ uuid: all[1] }), expect.objectContaining({ uuid: all[2] })] });
    expect((await w.api.get(`/deployments/applications/${app.uuid}`, { skip: 4 })).body.data.map((d: any) => d.uuid)).toEqual([all[4]]);
    expect((await w.api.get(`/deployments/applications/${app.uuid}`, { skip: 1, page: 1 })).status).toBe(422);
    expect((await w.api.get(`/deployments/applications/${app.uuid}`, { take: 101 })).status).toBe(422);
  });

  it("a server with Coolify's instant_validate and proxy_type; proxy_type none is refused", async () => {
    const w = await appWorld(t, keys);
    const res = await w.api.post("/servers", { name: "coolify-made", description: "d", ip: "10.0.0.7", port: 22, user: "root", private_key_uuid: w.keyUuid, is_build_server: false, instant_validate: true, proxy_type: "traefik" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect((await w.api.patch(`/servers/${res.body.uuid}`, { name: "renamed", proxy_type: "caddy", instant_validate: false })).status).toBe(200);
    const none = await w.api.post("/servers", { name: "no-proxy", ip: "10.0.0.8", private_key_uuid: w.keyUuid, proxy_type: "none" });
    expect(none.status).toBe(422);
    expect(Object.keys(none.body.errors)).toEqual(["proxy_type"]);
  });
});

describe("the OpenAPI document shows the aliases", () => {
  it("GET forms of actions need the deploy scope; compatibility fields are deprecated; /deploy is there", async () => {
    const doc = (await fetch(`${t.url}/api/v1/openapi.json`).then((r) => r.json())) as any;
    for (const path of ["/applications/{uuid}/start", "/applications/{uuid}/stop", "/applications/{uuid}/restart", "/databases/{uuid}/start", "/deploy"]) {
      expect(doc.paths[path].get["x-capstan-scope"], path).toBe("deploy");
    }
    expect(doc.paths["/deploy"].post["x-capstan-scope"]).toBe("deploy");
    const bulk = doc.paths["/applications/{uuid}/envs/bulk"].patch.requestBody.content["application/json"].schema;
    expect(bulk.properties.data.items.properties.is_literal.deprecated).toBe(true);
    expect(bulk.properties.variables.items.properties.is_multiline.deprecated).toBe(true);
    expect(doc.paths["/applications/private-github-app"].post.requestBody.content["application/json"].schema.properties.use_build_server.deprecated).toBe(true);
  });
});
