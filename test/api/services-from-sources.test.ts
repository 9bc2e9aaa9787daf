/**
 * Services from template-source templates (issue 17, spec 4.6 and 4.11): POST /services with
 * `type` naming a template of an enabled source creates the service from the full compose
 * file its last sync stored; a broken template is a 422 with its lint reason; disabling or
 * deleting the source later leaves the service untouched. Against a real git server (smart
 * HTTP through git http-backend), as test/api/template-sources.test.ts. The last test measures
 * the sync of a 350-template source and prints the figure.
 */
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { ServiceDetail } from "@capstan/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, ok, placement, type AppWorld } from "./support/applications.js";
import { GitRepos, startHttpGit, type HttpGitServer } from "../support/git-server.js";
import { BUILT_IN_CATALOG_DIR } from "../../control-plane/src/templates/index.js";

let t: TestInstance;
let w: AppWorld;
let repos: GitRepos;
let http: HttpGitServer;
const keys = new KeyFactory();

const STACK = `# documentation: https://example.org/docs
# slogan: A web app with its database and cache.
# tags: test, stack
# logo: svgs/x.svg
# port: 80

services:
  web:
    image: traefik/whoami:v1.10
    environment:
      - SERVICE_URL_WEB_80
      - DB_PASSWORD=\${SERVICE_PASSWORD_DB}
      - GREETING=\${GREETING:-from a source}
    depends_on:
      - db
      - cache
  db:
    image: postgres:16-alpine
    environment:
      - POSTGRES_USER=\${SERVICE_USER_DB}
      - POSTGRES_PASSWORD=\${SERVICE_PASSWORD_DB}
    volumes:
      - db-data:/var/lib/postgresql/data
  cache:
    image: redis:7-alpine
`;

const FILES = {
  "stack.yaml": STACK,
  // The built-in catalog has n8n: this one is offered as `srcs/n8n`.
  "n8n.yaml": STACK.replace("A web app with its database and cache.", "Not the built-in n8n."),
  "no-slogan.yaml": "# documentation: https://example.org\n# tags: broken\n\nservices:\n  web:\n    image: nginx:1.27-alpine\n",
};

const create = (body: Record<string, unknown>) => w.api.post("/services", { ...placement(w), ...body });
const detail = async (uuid: string) => ServiceDetail.parse((await ok(w.api.get(`/services/${uuid}`), "detail")) as unknown);

async function source(name: string, repo: string): Promise<{ uuid: string }> {
  const s = await ok(w.api.post("/template-sources", { name, repository_url: http.url(repo) }), "template source");
  await t.instance.services.templateSources.idle();
  const d = await ok(w.api.get(`/template-sources/${s.data.uuid}`), "source detail");
  expect(d.sync_status, d.sync_error).toBe("synced");
  return { uuid: s.data.uuid };
}

beforeAll(async () => {
  repos = await GitRepos.create();
  await repos.repo("srcs.git", FILES);
  http = await startHttpGit(repos.base);
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true", PLATFORM_NETWORK_MANAGEMENT: "true" });
  w = await appWorld(t, keys);
}, 60_000);

afterAll(async () => {
  await t?.close();
  await http?.stop();
  await repos?.cleanup();
  keys.cleanup();
});

describe("services from template-source templates", () => {
  let src: { uuid: string };
  let serviceUuid: string;

  it("POST /services with a source's template creates the service from its full compose file", async () => {
    src = await source("Srcs", "srcs.git");
    const res = await create({ type: "stack" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    // web is routable (SERVICE_URL_WEB_80): it gets a generated domain as a built-in template's would (appWorld's server is at 10.0.0.5).
    const generated = `http://web-${String(res.body.uuid).slice(0, 8)}.10.0.0.5.sslip.io`;
    expect(res.body).toEqual({ uuid: expect.any(String), name: "stack", type: "stack", domains: [generated] });
    serviceUuid = res.body.uuid;
    const d = await detail(serviceUuid);
    expect(d.template_source).toBe("srcs");
    expect(d.docker_compose_raw).toBe(STACK);
    expect(d.applications.map((a) => [a.name, a.fqdn])).toEqual([["web", generated]]);
    expect(d.databases.map((a) => a.name).sort()).toEqual(["cache", "db"]);
    expect(d.databases.find((c) => c.name === "db")!.image).toBe("postgres:16-alpine");
    const envs = Object.fromEntries(d.envs.map((e) => [e.key, e]));
    expect(envs.SERVICE_PASSWORD_DB).toMatchObject({ is_generated: true, value: expect.stringMatching(/^[A-Za-z0-9]{20,}$/) });
    expect(envs.GREETING).toMatchObject({ value: "from a source", is_generated: false });
    // The stored rendering is the full compose file with the generated values in it.
    const row = await t.instance.database.prisma.service.findUniqueOrThrow({ where: { uuid: serviceUuid } });
    const rendered = t.instance.box.open(row.composeRendered);
    expect(rendered).toContain(envs.SERVICE_PASSWORD_DB!.value!);
    expect(rendered).toContain("redis:7-alpine");
  });

  it("a name the built-in catalog has is slug/name; the bare name is the built-in template", async () => {
    const res = await create({ type: "srcs/n8n", name: "their-n8n" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const d = await detail(res.body.uuid);
    expect(d).toMatchObject({ type: "srcs/n8n", template_source: "srcs", name: "their-n8n" });
    expect(d.docker_compose_raw).toContain("Not the built-in n8n.");
    const builtIn = await create({ type: "n8n" });
    expect(builtIn.status, JSON.stringify(builtIn.body)).toBe(201);
    expect((await detail(builtIn.body.uuid)).template_source).toBe("built-in");
  });

  it("a broken template of a source is a 422 with its lint reason, and creates nothing", async () => {
    const before = await t.instance.database.prisma.service.count();
    for (const type of ["no-slogan", "srcs/no-slogan"]) {
      const res = await create({ type });
      expect(res.status).toBe(422);
      expect(res.body.errors.type.join(" ")).toMatch(/template source srcs.*slogan/);
    }
    const unknown = await create({ type: "srcs/nothing-like-it" });
    expect(unknown.status).toBe(422);
    expect(unknown.body.errors.type.join(" ")).toMatch(/Unknown template/);
    expect(await t.instance.database.prisma.service.count()).toBe(before);
  });

  it("another team cannot create from this team's source", async () => {
    const other = await appWorld(t, keys);
    const res = await other.api.post("/services", { ...placement(other), type: "stack" });
    expect(res.status).toBe(422);
    expect(res.body.errors.type.join(" ")).toMatch(/Unknown template/);
  });

  it("disabling, then deleting the source leaves the service untouched; the template is no longer offered", async () => {
    const before = await detail(serviceUuid);
    expect((await w.api.put(`/template-sources/${src.uuid}`, { is_enabled: false })).status).toBe(200);
    expect(await detail(serviceUuid)).toEqual(before);
    const offDisabled = await create({ type: "stack" });
    expect(offDisabled.status).toBe(422);
    expect((await w.api.delete(`/template-sources/${src.uuid}`)).status).toBe(200);
    expect(await detail(serviceUuid)).toEqual(before);
    // It stays usable: a PATCH re-checks its own copy of the compose file, not the source's.
    const patched = await w.api.patch(`/services/${serviceUuid}`, { name: "still-here" });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const after = await detail(serviceUuid);
    expect(after.docker_compose_raw).toBe(STACK);
    expect(after.envs).toEqual(before.envs);
  });

  it("measures the sync of a 350-template source (printed; the issue aims under 30 s)", async () => {
    // 350 templates made of the built-in catalog's files (real-sized compose files), each under its own name.
    const dir = BUILT_IN_CATALOG_DIR;
    const catalog = (await readdir(dir)).filter((f) => f.endsWith(".yaml")).sort();
    const files: Record<string, string> = {};
    for (let i = 0; i < 350; i++) {
      const f = catalog[i % catalog.length]!;
      files[`${f.replace(/\.yaml$/, "")}-${i}.yaml`] = await readFile(join(dir, f), "utf8");
    }
    await repos.repo("big.git", files);
    const started = performance.now();
    const big = await source("Big", "big.git");
    const ms = performance.now() - started;
    const d = await ok(w.api.get(`/template-sources/${big.uuid}`), "big detail");
    console.log(`[bench] sync of a 350-template source (${d.template_count} passed, ${d.broken_count} broken): ${(ms / 1000).toFixed(2)} s`);
    expect(d.template_count + d.broken_count).toBe(350);
    // One of them creates a service like any other.
    const name = (d.templates as { name: string }[])[0]!.name;
    const res = await create({ type: name });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect((await detail(res.body.uuid)).template_source).toBe("big");
  }, 120_000);
});
