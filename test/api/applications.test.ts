import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, createImageApp, newServer, ok, placement, type AppWorld } from "./support/applications.js";

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

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");

const DOCKERFILE = "# syntax=docker/dockerfile:1\nARG BASE=capstan-test/busybox\nFROM ${BASE}\nCOPY . /srv\nCMD [\"httpd\", \"-f\", \"-p\", \"8080\"]\n";
const COMPOSE = "services:\n  web:\n    image: nginx:1.27\n    environment:\n      - MODE=prod\n";

describe("POST /applications/public", () => {
  it("creates an application: 201 {uuid, name, fqdn}, with the full configuration readable", async () => {
    const res = await w.api.post("/applications/public", {
      ...placement(w),
      git_repository: "https://github.com/capstan-test/hello-node.git",
      git_branch: "main",
      build_pack: "builder_a",
      ports_exposes: "3000",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toEqual({ uuid: expect.stringMatching(UUID), name: "hello-node", fqdn: null });

    const got = await w.api.get(`/applications/${res.body.uuid}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({
      // resource backups (issue 19): the integer id resource_id names
      id: expect.any(Number),
      uuid: res.body.uuid,
      name: "hello-node",
      description: "",
      fqdn: null,
      status: "exited",
      source: "public",
      build_pack: "builder_a",
      git_repository: "https://github.com/capstan-test/hello-node.git",
      git_branch: "main",
      git_app_uuid: null,
      private_key_uuid: null,
      base_directory: "/",
      dockerfile: null,
      docker_registry_image_name: null,
      docker_compose_raw: null,
      ports_exposes: "3000",
      domains: [],
      project_uuid: w.project.uuid,
      project_name: "shop",
      environment_name: "production",
      environment_uuid: expect.stringMatching(UUID),
      server_uuid: w.server.uuid,
      destination_uuid: w.server.destinationUuid,
      health_check_enabled: false,
      health_check_path: "/",
      health_check_port: null,
      health_check_interval: 5,
      health_check_timeout: 5,
      health_check_retries: 10,
      health_check_start_period: 5,
      limits_memory: null,
      limits_cpus: null,
      envs: [],
      storages: [],
      deployments: [],
      webhooks: {
        github: expect.stringContaining(`/api/v1/webhooks/applications/${res.body.uuid}/github`),
        gitlab: expect.stringContaining(`/api/v1/webhooks/applications/${res.body.uuid}/gitlab`),
        gitea: expect.stringContaining(`/api/v1/webhooks/applications/${res.body.uuid}/gitea`),
        bitbucket: expect.stringContaining(`/api/v1/webhooks/applications/${res.body.uuid}/bitbucket`),
      },
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
    });
  });

  it("takes every common setting: name, description, domains, health check, limits, base directory", async () => {
    const res = await w.api.post("/applications/public", {
      ...placement(w),
      git_repository: "git://git.example.com/site.git",
      git_branch: "release/2.x",
      build_pack: "containerfile",
      name: "Shop front",
      description: "the storefront",
      ports_exposes: "8080, 9090",
      domains: "Shop.Example.com, http://plain.example.com/api/",
      base_directory: "apps/./front/",
      health_check_enabled: true,
      health_check_path: "/healthz?full=1",
      health_check_port: 9090,
      health_check_interval: 2,
      health_check_timeout: 3,
      health_check_retries: 4,
      health_check_start_period: 0,
      limits_memory: "512M",
      limits_cpus: "0.5",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toEqual({ uuid: expect.any(String), name: "Shop front", fqdn: "https://shop.example.com,http://plain.example.com/api" });
    const got = (await w.api.get(`/applications/${res.body.uuid}`)).body;
    expect(got).toMatchObject({
      description: "the storefront",
      build_pack: "containerfile",
      git_branch: "release/2.x",
      ports_exposes: "8080,9090",
      base_directory: "/apps/front",
      domains: [
        { host: "shop.example.com", https: true, path: "/", url: "https://shop.example.com" },
        { host: "plain.example.com", https: false, path: "/api", url: "http://plain.example.com/api" },
      ],
      health_check_enabled: true,
      health_check_path: "/healthz?full=1",
      health_check_port: 9090,
      health_check_interval: 2,
      health_check_timeout: 3,
      health_check_retries: 4,
      health_check_start_period: 0,
      limits_memory: "512m",
      limits_cpus: "0.5",
    });
  });

  it("refuses build packs that have their own create path, and SSH URLs", async () => {
    for (const build_pack of ["containerimage", "containercompose", "heroku"]) {
      const res = await w.api.post("/applications/public", { ...placement(w), git_repository: "https://github.com/a/b", git_branch: "main", build_pack });
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(["build_pack"]);
    }
    const ssh = await w.api.post("/applications/public", { ...placement(w), git_repository: "git@github.com:a/b.git", git_branch: "main", build_pack: "builder_a" });
    expect(ssh.status).toBe(422);
    expect(ssh.body.errors.git_repository[0]).toMatch(/private-deploy-key/);
  });

  it("names every missing required field", async () => {
    const res = await w.api.post("/applications/public", {});
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors).sort()).toEqual(
      ["build_pack", "destination_uuid", "environment_name", "git_branch", "git_repository", "project_uuid", "server_uuid"].sort(),
    );
  });
});

describe("the other create paths", () => {
  it("private-deploy-key: an SSH URL and a key of the team", async () => {
    for (const git_repository of ["git@github.com:acme/api.git", "ssh://git@git.example.com:2222/acme/api.git"]) {
      const res = await w.api.post("/applications/private-deploy-key", {
        ...placement(w),
        private_key_uuid: w.keyUuid,
        git_repository,
        git_branch: "main",
        build_pack: "builder_c",
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.name).toBe("api");
      const got = (await w.api.get(`/applications/${res.body.uuid}`)).body;
      expect(got).toMatchObject({ source: "private_deploy_key", private_key_uuid: w.keyUuid, git_repository, build_pack: "builder_c" });
    }
    const https = await w.api.post("/applications/private-deploy-key", {
      ...placement(w),
      private_key_uuid: w.keyUuid,
      git_repository: "https://github.com/acme/api.git",
      git_branch: "main",
      build_pack: "builder_a",
    });
    expect(https.status).toBe(422);
    expect(Object.keys(https.body.errors)).toEqual(["git_repository"]);
    const missing = await w.api.post("/applications/private-deploy-key", {
      ...placement(w),
      private_key_uuid: "00000000-0000-4000-8000-000000000000",
      git_repository: "git@github.com:acme/api.git",
      git_branch: "main",
      build_pack: "builder_a",
    });
    expect(missing.status).toBe(404);
    expect(missing.body.message).toBe("Private key not found.");
  });

  it("dockerfile: raw or base64 contents, stored decoded", async () => {
    const raw = await w.api.post("/applications/dockerfile", { ...placement(w), dockerfile: DOCKERFILE, ports_exposes: "8080", fqdn: "df.example.com" });
    expect(raw.status, JSON.stringify(raw.body)).toBe(201);
    expect(raw.body).toMatchObject({ name: "dockerfile-app", fqdn: "https://df.example.com" });
    const encoded = await w.api.post("/applications/dockerfile", { ...placement(w), dockerfile: b64(DOCKERFILE), build_pack: "containerfile" });
    expect(encoded.status).toBe(201);
    // base64 wrapped at 76 columns, as `base64` prints it
    const wrapped = await w.api.post("/applications/dockerfile", { ...placement(w), dockerfile: b64(DOCKERFILE).replace(/(.{76})/g, "$1\n") });
    expect(wrapped.status).toBe(201);
    for (const r of [raw, encoded, wrapped]) {
      const got = (await w.api.get(`/applications/${r.body.uuid}`)).body;
      expect(got).toMatchObject({ source: "dockerfile", build_pack: "containerfile", dockerfile: DOCKERFILE, git_repository: null });
    }
  });

  it("dockerfile: refuses contents without FROM, raw or encoded, and another build pack", async () => {
    for (const dockerfile of ["echo hello", b64("RUN rm -rf /\n"), "QUJD", "", "FROM scratch\u0000"]) {
      const res = await w.api.post("/applications/dockerfile", { ...placement(w), dockerfile });
      expect(res.status, dockerfile).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(["dockerfile"]);
    }
    const pack = await w.api.post("/applications/dockerfile", { ...placement(w), dockerfile: DOCKERFILE, build_pack: "builder_a" });
    expect(pack.status).toBe(422);
  });

  it("dockerimage: tag in the name, separate, by digest, or latest", async () => {
    const digest = "sha256:" + "a".repeat(64);
    const cases: [Record<string, string>, string, string][] = [
      [{ docker_registry_image_name: "nginx:1.27" }, "nginx:1.27", "nginx"],
      [{ docker_registry_image_name: "ghcr.io/acme/api", docker_registry_image_tag: "v2" }, "ghcr.io/acme/api:v2", "api"],
      [{ docker_registry_image_name: "registry.local:5000/team/web" }, "registry.local:5000/team/web:latest", "web"],
      [{ docker_registry_image_name: `busybox@${digest}` }, `busybox@${digest}`, "busybox"],
      [{ docker_registry_image_name: "nginx:1.27", docker_registry_image_tag: "1.27" }, "nginx:1.27", "nginx"],
    ];
    for (const [body, image, name] of cases) {
      const res = await w.api.post("/applications/dockerimage", { ...placement(w), ...body });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.name).toBe(name);
      const got = (await w.api.get(`/applications/${res.body.uuid}`)).body;
      expect(got).toMatchObject({ source: "dockerimage", build_pack: "containerimage", docker_registry_image_name: image, ports_exposes: "80" });
    }
    const clash = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx:1.27", docker_registry_image_tag: "1.26" });
    expect(clash.status).toBe(422);
    expect(Object.keys(clash.body.errors)).toEqual(["docker_registry_image_tag"]);
  });

  it("dockercompose: raw or base64 YAML checked by the compose rules", async () => {
    const raw = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: COMPOSE, fqdn: "compose.example.com" });
    expect(raw.status, JSON.stringify(raw.body)).toBe(201);
    const encoded = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: b64(COMPOSE) });
    expect(encoded.status, JSON.stringify(encoded.body)).toBe(201);
    for (const r of [raw, encoded]) {
      expect((await w.api.get(`/applications/${r.body.uuid}`)).body).toMatchObject({ source: "dockercompose", build_pack: "containercompose", docker_compose_raw: COMPOSE });
    }
    const bad = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: "services:\n  web:\n    image: nginx\n    privileged: true\n" });
    expect(bad.status).toBe(422);
    expect(bad.body.errors.docker_compose_raw.join(" ")).toMatch(/privileged/);
    const yaml = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: "services: [" });
    expect(yaml.status).toBe(422);
    expect(Object.keys(yaml.body.errors)).toEqual(["docker_compose_raw"]);
  });
});

describe("where an application goes: ids resolved in the caller's team", () => {
  it("answers 404 for an unknown project, environment, server or destination", async () => {
    const base = { ...placement(w), docker_registry_image_name: "nginx" };
    const other = await newServer(w.api, w.keyUuid, "other");
    const cases: [Record<string, string>, string][] = [
      [{ project_uuid: "00000000-0000-4000-8000-000000000000" }, "Project not found."],
      [{ environment_name: "staging" }, "Environment not found."],
      [{ server_uuid: "00000000-0000-4000-8000-000000000000" }, "Server not found."],
      // a destination of another server of the same team
      [{ destination_uuid: other.destinationUuid }, "Destination not found."],
    ];
    const before = (await w.api.get("/applications")).body.data.length;
    for (const [patch, message] of cases) {
      const res = await w.api.post("/applications/dockerimage", { ...base, ...patch });
      expect(res.status, message).toBe(404);
      expect(res.body).toEqual({ message });
    }
    expect((await w.api.get("/applications")).body.data.length).toBe(before);
    // the other server with its own destination is fine
    const onOther = await w.api.post("/applications/dockerimage", { ...base, server_uuid: other.uuid, destination_uuid: other.destinationUuid });
    expect(onOther.status).toBe(201);
    expect((await w.api.get(`/applications/${onOther.body.uuid}`)).body.server_uuid).toBe(other.uuid);
  });

  it("creates in another environment of the project by name", async () => {
    await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "staging" }), "env");
    const app = await createImageApp(w, { environment_name: "staging" });
    expect((await w.api.get(`/applications/${app.uuid}`)).body.environment_name).toBe("staging");
  });

  it("the environment shows its applications, and only its own", async () => {
    await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "qa" }), "env");
    const inQa = await createImageApp(w, { environment_name: "qa", name: "qa-app" });
    const env = await w.api.get(`/projects/${w.project.uuid}/qa`);
    expect(env.status).toBe(200);
    expect(env.body.applications).toEqual([
      expect.objectContaining({ uuid: inQa.uuid, name: "qa-app", environment_name: "qa", project_uuid: w.project.uuid, status: "exited" }),
    ]);
    const production = (await w.api.get(`/projects/${w.project.uuid}/production`)).body.applications as { uuid: string }[];
    expect(production.map((a) => a.uuid)).not.toContain(inQa.uuid);
  });
});

describe("domains", () => {
  it("one host and path serves one application per server: 409 for a second one", async () => {
    const first = await createImageApp(w, { fqdn: "https://unique.example.com" });
    const second = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx", fqdn: "http://UNIQUE.example.com" });
    expect(second.status).toBe(409);
    expect(second.body.message).toMatch(/unique\.example\.com/);
    // another path on the same host is another route
    expect((await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx", fqdn: "https://unique.example.com/admin" })).status).toBe(201);
    // the same host on another server is no conflict
    const other = await newServer(w.api, w.keyUuid, "eu");
    const elsewhere = await w.api.post("/applications/dockerimage", { ...placement(w), server_uuid: other.uuid, destination_uuid: other.destinationUuid, docker_registry_image_name: "nginx", fqdn: "unique.example.com" });
    expect(elsewhere.status).toBe(201);
    // PATCH onto a taken domain: 409, unchanged
    const third = await createImageApp(w);
    const patch = await w.api.patch(`/applications/${third.uuid}`, { fqdn: "unique.example.com" });
    expect(patch.status).toBe(409);
    expect((await w.api.get(`/applications/${third.uuid}`)).body.fqdn).toBeNull();
    // an application may keep its own domain when patched
    expect((await w.api.patch(`/applications/${first.uuid}`, { fqdn: "https://unique.example.com,https://www.unique.example.com" })).status).toBe(200);
  });

  it("refuses fqdn and domains given with different values, duplicates and ports", async () => {
    const both = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx", fqdn: "a.example.com", domains: "b.example.com" });
    expect(both.status).toBe(422);
    expect(Object.keys(both.body.errors)).toEqual(["domains"]);
    for (const fqdn of ["a.example.com,a.example.com", "https://a.example.com:8443"]) {
      const res = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx", fqdn });
      expect(res.status, fqdn).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(["fqdn"]);
    }
  });
});

describe("GET /applications", () => {
  it("lists the team's applications with the spec's fields, oldest first, paginated on request", async () => {
    const world = await appWorld(t, keys);
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await createImageApp(world, { name: `app-${i}`, fqdn: `app${i}.example.com` }));
    const list = await world.api.get("/applications");
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      data: made.map((m, i) => ({
        uuid: m.uuid,
        name: `app-${i}`,
        fqdn: `https://app${i}.example.com`,
        status: "exited",
        build_pack: "containerimage",
        git_repository: null,
        git_branch: null,
        project_uuid: world.project.uuid,
        environment_name: "production",
        server_uuid: world.server.uuid,
        created_at: expect.stringMatching(ISO),
      })),
    });
    const page = await world.api.get("/applications", { page: 2, per_page: 2 });
    expect(page.body).toEqual({ data: [expect.objectContaining({ uuid: made[2]!.uuid })], meta: { current_page: 2, per_page: 2, total: 3, last_page: 2 } });
    expect((await world.api.get("/applications", { per_page: 101 })).status).toBe(422);
    // another team sees none of them
    const stranger = await t.newTeam();
    expect((await stranger.api.get("/applications")).body).toEqual({ data: [] });
    expect((await stranger.api.get(`/applications/${made[0]!.uuid}`)).status).toBe(404);
  });
});

describe("PATCH /applications/{uuid}", () => {
  it("changes only the fields given", async () => {
    const created = await w.api.post("/applications/public", {
      ...placement(w),
      git_repository: "https://github.com/acme/site",
      git_branch: "main",
      build_pack: "builder_b",
      name: "site",
      fqdn: "site.example.com",
      limits_memory: "256m",
    });
    const uuid = created.body.uuid;
    const before = (await w.api.get(`/applications/${uuid}`)).body;
    const res = await w.api.patch(`/applications/${uuid}`, { name: "site-2", git_branch: "develop", ports_exposes: "8080", fqdn: "https://site2.example.com" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.message).toBe("Application updated.");
    expect(res.body.data).toEqual({
      ...before,
      name: "site-2",
      git_branch: "develop",
      ports_exposes: "8080",
      fqdn: "https://site2.example.com",
      domains: [{ host: "site2.example.com", https: true, path: "/", url: "https://site2.example.com" }],
      updated_at: expect.stringMatching(ISO),
    });
    const more = await w.api.patch(`/applications/${uuid}`, {
      build_pack: "builder_d",
      git_repository: "http://git.example.com/acme/site2.git",
      limits_memory: null,
      health_check_enabled: true,
      fqdn: "",
    });
    expect(more.status, JSON.stringify(more.body)).toBe(200);
    expect(more.body.data).toMatchObject({ name: "site-2", build_pack: "builder_d", git_repository: "http://git.example.com/acme/site2.git", limits_memory: null, health_check_enabled: true, fqdn: null, domains: [] });
  });

  it("refuses an empty body and settings of another kind of source, changing nothing", async () => {
    const app = await createImageApp(w);
    const before = (await w.api.get(`/applications/${app.uuid}`)).body;
    const empty = await w.api.patch(`/applications/${app.uuid}`, {});
    expect(empty.status).toBe(422);
    const unknown = await w.api.patch(`/applications/${app.uuid}`, { colour: "blue" });
    expect(unknown.status).toBe(422);
    const wrong = await w.api.patch(`/applications/${app.uuid}`, { name: "renamed", git_branch: "main", dockerfile: DOCKERFILE, build_pack: "builder_a" });
    expect(wrong.status).toBe(422);
    expect(Object.keys(wrong.body.errors).sort()).toEqual(["build_pack", "dockerfile", "git_branch"]);
    expect((await w.api.get(`/applications/${app.uuid}`)).body).toEqual(before);
  });

  it("changes an image's tag, a Dockerfile and a compose file within their sources", async () => {
    const image = await createImageApp(w, { docker_registry_image_name: "ghcr.io/acme/api:1.0" });
    expect((await w.api.patch(`/applications/${image.uuid}`, { docker_registry_image_tag: "1.1" })).body.data.docker_registry_image_name).toBe("ghcr.io/acme/api:1.1");
    expect((await w.api.patch(`/applications/${image.uuid}`, { docker_registry_image_name: "nginx" })).body.data.docker_registry_image_name).toBe("nginx:latest");

    const df = await ok(w.api.post("/applications/dockerfile", { ...placement(w), dockerfile: DOCKERFILE }), "dockerfile app");
    const changed = "FROM capstan-test/debian\nCMD [\"sleep\", \"infinity\"]\n";
    expect((await w.api.patch(`/applications/${df.uuid}`, { dockerfile: b64(changed) })).body.data.dockerfile).toBe(changed);

    const compose = await ok(w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: COMPOSE }), "compose app");
    const bad = await w.api.patch(`/applications/${compose.uuid}`, { docker_compose_raw: "services:\n  web:\n    image: nginx\n    network_mode: host\n" });
    expect(bad.status).toBe(422);
    expect((await w.api.get(`/applications/${compose.uuid}`)).body.docker_compose_raw).toBe(COMPOSE);
    const good = "services:\n  api:\n    image: nginx:1.27\n";
    expect((await w.api.patch(`/applications/${compose.uuid}`, { docker_compose_raw: good })).body.data.docker_compose_raw).toBe(good);
  });

  it("validates a new git_repository as the application's create path does", async () => {
    const app = await ok(
      w.api.post("/applications/private-deploy-key", { ...placement(w), private_key_uuid: w.keyUuid, git_repository: "git@github.com:a/b.git", git_branch: "main", build_pack: "builder_a" }),
      "deploy key app",
    );
    const https = await w.api.patch(`/applications/${app.uuid}`, { git_repository: "https://github.com/a/b.git" });
    expect(https.status).toBe(422);
    expect(Object.keys(https.body.errors)).toEqual(["git_repository"]);
    expect((await w.api.patch(`/applications/${app.uuid}`, { git_repository: "git@gitlab.com:a/c.git" })).body.data.git_repository).toBe("git@gitlab.com:a/c.git");
  });
});

describe("injection corpus: every value that could break out of a command or config is a 422 and creates nothing", () => {
  const counts = async () => {
    const db = t.instance.database.prisma;
    return { apps: await db.application.count(), envs: await db.envVar.count(), volumes: await db.volume.count(), jobs: await db.job.count() };
  };

  const GIT_URLS = [
    "ext::sh -c touch% /tmp/pwned",
    "file:///etc/passwd",
    "/srv/git/repo.git",
    "--upload-pack=touch /tmp/pwned",
    "-oProxyCommand=touch /tmp/pwned",
    "ssh://-oProxyCommand=touch%20/tmp/pwned/x",
    "https://github.com/a/b.git;id",
    "https://github.com/a/b.git && id",
    "https://github.com/$(id)/b.git",
    "https://github.com/a/`id`.git",
    "https://github.com/a/b.git\n--upload-pack=id",
    "https://user:secret@github.com/a/b.git",
    "https://github.com/a/b.git?x=1",
    "git@github.com:-x/y",
    "http://[::1/a",
    "fd::/x",
  ];
  const BRANCHES = ["--upload-pack=id", "-f", "main;id", "$(id)", "main`id`", "main\nid", "a..b", "main lock", "refs/heads/x.lock", "@", "a@{1}", "feature/", ".hidden", "x\\y", "x:y", "a~1", "a^", "a?", "a*", "a[b"];
  const IMAGES = ["nginx;id", "$(id)", "-it", "nginx:latest --privileged", "NGINX", "nginx@sha256:zz", "a b", "--rm", "../etc", "nginx|id"];
  const FQDNS = ["javascript:alert(1)", "https://a.example.com?x=1", "https://user@a.example.com", "a b.example.com", "ftp://a.example.com", "https://-a.example.com", "https://a.example.com#x", "https://$(id).example.com"];
  const PORTS = ["80;id", "0", "70000", "80 443", "$(id)", "-1", "80,"];
  const HEALTH = ["/health'; rm -rf /; '", "/$(id)", "/`id`", "health", "/a b", "/x\"y", "/x\\y"];
  const BASE_DIRS = ["../../etc", "-x", "a/../../b", "$(id)", "a;b", "a b"];

  it.each([
    ...GIT_URLS.map((v) => ["git_repository", v] as const),
    ...BRANCHES.map((v) => ["git_branch", v] as const),
    ...FQDNS.map((v) => ["fqdn", v] as const),
    ...PORTS.map((v) => ["ports_exposes", v] as const),
    ...HEALTH.map((v) => ["health_check_path", v] as const),
    ...BASE_DIRS.map((v) => ["base_directory", v] as const),
    ["limits_memory", "1g; rm -rf /"] as const,
    ["limits_memory", "1m"] as const,
    ["limits_cpus", "1;id"] as const,
    ["limits_cpus", "0"] as const,
    ["name", "bad\nname"] as const,
  ])("public %s %j", async (field, value) => {
    const before = await counts();
    const res = await w.api.post("/applications/public", {
      ...placement(w),
      git_repository: "https://github.com/a/b.git",
      git_branch: "main",
      build_pack: "builder_a",
      [field]: value,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([field]);
    expect(await counts()).toEqual(before);
  });

  it.each(IMAGES)("dockerimage name %j", async (value) => {
    const before = await counts();
    const res = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: value });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(["docker_registry_image_name"]);
    expect(await counts()).toEqual(before);
  });

  it.each(["1.0;id", "$(id)", "-x", "a b", ":x"])("dockerimage tag %j", async (value) => {
    const before = await counts();
    const res = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx", docker_registry_image_tag: value });
    expect(res.status).toBe(422);
    expect(await counts()).toEqual(before);
  });

  it.each([
    ["privileged", "services:\n  web:\n    image: nginx\n    privileged: true\n"],
    ["host root bind", "services:\n  web:\n    image: nginx\n    volumes:\n      - /:/host\n"],
    ["docker socket", "services:\n  web:\n    image: nginx\n    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n"],
    ["host network", "services:\n  web:\n    image: nginx\n    network_mode: host\n"],
    ["host pid", "services:\n  web:\n    image: nginx\n    pid: host\n"],
    ["cap_add", "services:\n  web:\n    image: nginx\n    cap_add: [SYS_ADMIN]\n"],
    ["devices", "services:\n  web:\n    image: nginx\n    devices: ['/dev/sda:/dev/sda']\n"],
    ["build", "services:\n  web:\n    build: .\n"],
    ["env_file", "services:\n  web:\n    image: nginx\n    env_file: /etc/shadow\n"],
    ["image injection", "services:\n  web:\n    image: 'nginx; id'\n"],
    ["not a mapping", "- a\n- b\n"],
    ["no services", "volumes: {}\n"],
  ])("dockercompose %s", async (_, raw) => {
    const before = await counts();
    for (const docker_compose_raw of [raw, b64(raw)]) {
      const res = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw });
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(["docker_compose_raw"]);
    }
    expect(await counts()).toEqual(before);
  });
});

describe("DELETE /applications/{uuid} without an agent", () => {
  it("deletes the record and queues the removal; flags from the query string or the body", async () => {
    const db = t.instance.database.prisma;
    for (const how of ["default", "query", "body"] as const) {
      const app = await createImageApp(w);
      const jobsBefore = await db.job.count({ where: { type: "app.action" } });
      const res =
        how === "default"
          ? await w.api.delete(`/applications/${app.uuid}`)
          : how === "query"
            ? await w.api.delete(`/applications/${app.uuid}?delete_volumes=true&docker_cleanup=0`)
            : await w.api.delete(`/applications/${app.uuid}`, { delete_volumes: true, docker_cleanup: false });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toEqual({ message: "Application deleted; its containers are being removed from the server." });
      expect((await w.api.get(`/applications/${app.uuid}`)).status).toBe(404);
      expect(await db.job.count({ where: { type: "app.action" } })).toBe(jobsBefore + 1);
    }
  });

  it("with delete_configurations=false still queues the removal of its containers (the configuration files are kept); volumes may go too", async () => {
    const db = t.instance.database.prisma;
    for (const body of [{ delete_configurations: false }, { delete_configurations: false, delete_volumes: true }]) {
      const app = await createImageApp(w);
      const jobsBefore = await db.job.count({ where: { type: "app.action" } });
      const res = await w.api.delete(`/applications/${app.uuid}`, body);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.message).toMatch(/containers are being removed from the server \(its configuration files there are kept\)/);
      expect(await db.job.count({ where: { type: "app.action" } })).toBe(jobsBefore + 1);
      expect((await w.api.get(`/applications/${app.uuid}`)).status).toBe(404);
    }
  });

  it("refuses contradicting flags, changing nothing", async () => {
    const app = await createImageApp(w);
    const twice = await w.api.delete(`/applications/${app.uuid}?delete_volumes=true`, { delete_volumes: false });
    expect(twice.status).toBe(422);
    expect(Object.keys(twice.body.errors)).toEqual(["delete_volumes"]);
    const bad = await w.api.delete(`/applications/${app.uuid}?docker_cleanup=yes`);
    expect(bad.status).toBe(422);
    expect(Object.keys(bad.body.errors)).toEqual(["docker_cleanup"]);
    expect((await w.api.get(`/applications/${app.uuid}`)).status).toBe(200);
  });
});
