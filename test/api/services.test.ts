/**
 * Services (spec 4.6, issue 17): create from a built-in template or a compose file, list,
 * detail (components, compose content, variables, aggregated status), PATCH, DELETE and
 * variables; generated values created once and kept byte-identical; masking by the one rule.
 */
import { ServiceDetail, ServiceList } from "@capstan/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, ok, placement, type AppWorld } from "./support/applications.js";

let t: TestInstance;
let w: AppWorld;
const keys = new KeyFactory();

beforeAll(async () => {
  // Network management on: services attach shared networks (spec 4.8).
  t = await startTestInstance({ PLATFORM_NETWORK_MANAGEMENT: "true" });
  w = await appWorld(t, keys);
});
afterAll(async () => {
  await t?.close();
  keys.cleanup();
});

const prisma = () => t.instance.database.prisma;
const create = (body: Record<string, unknown>) => w.api.post("/services", { ...placement(w), ...body });
const detail = async (uuid: string) => ServiceDetail.parse((await ok(w.api.get(`/services/${uuid}`), "detail")) as unknown);
const counts = async () => ({ services: await prisma().service.count(), components: await prisma().serviceComponent.count(), envs: await prisma().envVar.count() });

const CUSTOM = `services:
  web:
    image: nginx:1.27
    environment:
      - SERVICE_URL_WEB_80
      - ADMIN_PASSWORD=\${SERVICE_PASSWORD_ADMIN}
      - GREETING=\${GREETING:-hello}
  cache:
    image: redis:7
    command: ["redis-server", "--requirepass", "\${SERVICE_PASSWORD_REDIS}"]
`;

describe("POST /services", () => {
  it("creates a service from a built-in template: 201 {uuid, name, type, domains}, components classified by image, generated values stored sealed", async () => {
    const res = await create({ type: "plausible" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(["domains", "name", "type", "uuid"]);
    expect(res.body).toMatchObject({ name: "plausible", type: "plausible" });
    // The routable application's generated domain (docs/services.md): the server is at 10.0.0.5.
    const generated = `http://plausible-${(res.body.uuid as string).slice(0, 8)}.10.0.0.5.sslip.io`;
    expect(res.body.domains).toEqual([generated]);

    const d = await detail(res.body.uuid);
    expect(d.type).toBe("plausible");
    expect(d.template_source).toBe("built-in");
    expect(d.status).toBe("exited");
    expect(d.applications.map((a) => a.name)).toEqual(["plausible"]);
    expect(d.databases.map((a) => a.name).sort()).toEqual(["clickhouse", "postgres"]);
    expect(d.applications[0]).toMatchObject({ image: "ghcr.io/plausible/community-edition:v2.1", status: "exited", exclude_from_status: false, fqdn: generated });
    // The compose content is the template's text: secrets never appear in it.
    expect(d.docker_compose_raw).toContain("${SERVICE_PASSWORD_POSTGRES}");

    const envs = Object.fromEntries(d.envs.map((e) => [e.key, e]));
    expect(envs.SERVICE_PASSWORD_POSTGRES).toMatchObject({ is_generated: true, value: expect.stringMatching(/^[A-Za-z0-9]{20,}$/) });
    expect(envs.SERVICE_USER_POSTGRES!.is_generated).toBe(true);
    // An input's default is stored as its value (not generated); SERVICE_URL_* follow the fqdn and are never stored.
    expect(envs.POSTGRES_DB).toMatchObject({ value: "plausible", is_generated: false });
    expect(Object.keys(envs).some((k) => k.startsWith("SERVICE_URL_") || k.startsWith("SERVICE_FQDN_"))).toBe(false);

    // Sealed at rest.
    const row = await prisma().envVar.findFirstOrThrow({ where: { key: "SERVICE_PASSWORD_POSTGRES", service: { uuid: res.body.uuid } } });
    expect(row.value).not.toContain(envs.SERVICE_PASSWORD_POSTGRES!.value!);
    expect(t.instance.box.open(row.value)).toBe(envs.SERVICE_PASSWORD_POSTGRES!.value);
  });

  it("creates a custom compose service from docker_compose_raw (type null), with its magic variables", async () => {
    const res = await create({ docker_compose_raw: CUSTOM, name: "mine" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ name: "mine", type: null });
    const d = await detail(res.body.uuid);
    expect(d.docker_compose_raw).toBe(CUSTOM);
    expect(d.template_source).toBeNull();
    expect(d.applications.map((a) => a.name)).toEqual(["web"]);
    expect(d.databases.map((a) => a.name)).toEqual(["cache"]);
    expect(d.envs.map((e) => e.key).sort()).toEqual(["GREETING", "SERVICE_PASSWORD_ADMIN", "SERVICE_PASSWORD_REDIS"]);
  });

  it("refuses an unknown type, both or neither of type and docker_compose_raw, and a non-boolean instant_deploy with 422 naming the field; nothing is created", async () => {
    const before = await counts();
    const unknown = await create({ type: "no-such-template" });
    expect(unknown.status).toBe(422);
    expect(Object.keys(unknown.body.errors)).toEqual(["type"]);
    expect((await create({})).body.errors).toHaveProperty("type");
    expect((await create({ type: "n8n", docker_compose_raw: CUSTOM })).body.errors).toHaveProperty("docker_compose_raw");
    // instant_deploy true starts the service (services-lifecycle.test.ts); anything but a boolean is refused.
    const instant = await create({ type: "n8n", instant_deploy: "yes" });
    expect(instant.status).toBe(422);
    expect(instant.body.errors).toHaveProperty("instant_deploy");
    expect((await create({ type: "n8n", bogus: 1 })).status).toBe(422);
    expect(await counts()).toEqual(before);
  });

  it("checks docker_compose_raw like an application's compose file (the injection corpus, bind-mount rule)", async () => {
    const before = await counts();
    const privileged = await create({ docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n    privileged: true\n" });
    expect(privileged.status).toBe(422);
    expect(privileged.body.errors.docker_compose_raw.join(" ")).toMatch(/privileged/);
    const hostNet = await create({ docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n    network_mode: host\n" });
    expect(hostNet.status).toBe(422);
    expect((await create({ docker_compose_raw: "services: [" })).status).toBe(422);
    // A bind mount of a server directory needs a team owner or admin (or the team's setting).
    const member = await t.newMember(w.team.teamId, "member");
    const project = await prisma().project.findUniqueOrThrow({ where: { uuid: w.project.uuid } });
    await prisma().projectPermission.create({ data: { projectId: project.id, userId: member.userId, level: "full_access" } });
    const bind = await t.api(member.token).post("/services", { ...placement(w), docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n    volumes:\n      - /srv/data:/data\n" });
    expect(bind.status).toBe(403);
    expect(await counts()).toEqual(before);
  });

  it("finds the project, server and destination inside the caller's team only (404)", async () => {
    const other = await appWorld(t, keys);
    const before = await counts();
    expect((await w.api.post("/services", { ...placement(other), type: "n8n" })).status).toBe(404);
    expect((await w.api.post("/services", { ...placement(w), server_uuid: other.server.uuid, type: "n8n" })).status).toBe(404);
    expect(await counts()).toEqual(before);
  });
});

describe("reads", () => {
  it("GET /services lists the spec's fields, oldest first, paged on request", async () => {
    const a = await ok(create({ type: "uptime-kuma", name: "list-a" }), "a");
    const b = await ok(create({ type: "n8n", name: "list-b" }), "b");
    const list = ServiceList.parse((await ok(w.api.get("/services"), "list")) as unknown);
    const uuids = list.data.map((s) => s.uuid);
    expect(uuids.indexOf(a.uuid)).toBeLessThan(uuids.indexOf(b.uuid));
    expect(list.data.find((s) => s.uuid === b.uuid)).toMatchObject({ name: "list-b", type: "n8n", status: "exited", project_uuid: w.project.uuid, environment_name: "production", server_uuid: w.server.uuid });
    const page = (await w.api.get("/services", { page: 1, per_page: 1 })).body;
    expect(page.data).toHaveLength(1);
    expect(page.meta.total).toBe(list.data.length);
  });

  it("masks variable values by the one rule: a view-only member and a write-only token see null; an unknown uuid is 404", async () => {
    const svc = await ok(create({ type: "n8n" }), "n8n");
    const viewer = await t.newMember(w.team.teamId, "viewer");
    const d = (await t.api(viewer.token).get(`/services/${svc.uuid}`)).body;
    expect(d.envs.length).toBeGreaterThan(0);
    expect(d.envs.every((e: { value: unknown }) => e.value === null)).toBe(true);
    expect((await t.api(viewer.token).get(`/services/${svc.uuid}/envs`)).body.data.every((e: { value: unknown }) => e.value === null)).toBe(true);
    const owner = (await w.api.get(`/services/${svc.uuid}/envs`)).body.data;
    expect(owner.every((e: { value: unknown }) => typeof e.value === "string")).toBe(true);
    expect((await w.api.get("/services/00000000-0000-0000-0000-000000000000")).status).toBe(404);
  });
});

describe("PATCH /services/{uuid}", () => {
  it("changes the name; a new compose file keeps stored values byte-identical, generates only new ones, and keeps component uuids", async () => {
    const svc = await ok(create({ docker_compose_raw: CUSTOM }), "custom");
    const before = await detail(svc.uuid);
    const value = (k: string, d: typeof before) => d.envs.find((e) => e.key === k)?.value;
    const web = before.applications[0]!;

    const renamed = await w.api.patch(`/services/${svc.uuid}`, { name: "renamed" });
    expect(renamed.status).toBe(200);
    expect(renamed.body.message).toMatch(/next start or restart/);
    expect(renamed.body.data.name).toBe("renamed");

    const next = CUSTOM.replace("  cache:", "    labels:\n      - x=1\n  worker:\n    image: busybox:1\n    environment:\n      - TOKEN=${SERVICE_HEX_32_WORKER}\n  cache:");
    const res = await w.api.patch(`/services/${svc.uuid}`, { docker_compose_raw: next });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const after = await detail(svc.uuid);
    expect(after.docker_compose_raw).toBe(next);
    expect(value("SERVICE_PASSWORD_ADMIN", after)).toBe(value("SERVICE_PASSWORD_ADMIN", before));
    expect(value("SERVICE_PASSWORD_REDIS", after)).toBe(value("SERVICE_PASSWORD_REDIS", before));
    expect(value("SERVICE_HEX_32_WORKER", after)).toMatch(/^[0-9a-f]{32,}$/);
    expect(after.applications.find((a) => a.name === "web")!.uuid).toBe(web.uuid);
    expect(after.applications.map((a) => a.name).sort()).toEqual(["web", "worker"]);

    // A component the file drops goes.
    await ok(w.api.patch(`/services/${svc.uuid}`, { docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n" }), "shrink");
    const shrunk = await detail(svc.uuid);
    expect([...shrunk.applications, ...shrunk.databases].map((c) => c.name)).toEqual(["web"]);
    expect(value("SERVICE_PASSWORD_ADMIN", shrunk)).toBe(value("SERVICE_PASSWORD_ADMIN", before));
  });

  it("refuses an unsafe compose file with 422 and changes nothing", async () => {
    const svc = await ok(create({ docker_compose_raw: CUSTOM }), "custom");
    const before = await detail(svc.uuid);
    const res = await w.api.patch(`/services/${svc.uuid}`, { name: "x", docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n    cap_add: [SYS_ADMIN]\n" });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(["docker_compose_raw"]);
    expect(await detail(svc.uuid)).toEqual(before);
    expect((await w.api.patch(`/services/${svc.uuid}`, {})).status).toBe(422);
  });
});

describe("variables", () => {
  it("PATCH .../envs creates a key or changes it; bulk saves several; DELETE removes; answers say changes apply on the next start", async () => {
    const svc = await ok(create({ type: "uptime-kuma" }), "svc");
    const created = await w.api.patch(`/services/${svc.uuid}/envs`, { key: "EXTRA", value: "p$ss ${HOME}" });
    expect(created.status).toBe(200);
    expect(created.body.message).toMatch(/next start or restart/);
    expect(created.body.data).toMatchObject({ key: "EXTRA", value: "p$ss ${HOME}", is_generated: false });
    const updated = await w.api.patch(`/services/${svc.uuid}/envs`, { key: "EXTRA", value: "two" });
    expect(updated.body.data).toMatchObject({ uuid: created.body.data.uuid, value: "two" });

    const bulk = await w.api.patch(`/services/${svc.uuid}/envs/bulk`, { variables: [{ key: "EXTRA", value: "three" }, { key: "MORE", value: "x" }] });
    expect(bulk.status).toBe(200);
    expect(bulk.body.data.map((e: { key: string; value: string }) => `${e.key}=${e.value}`)).toEqual(["EXTRA=three", "MORE=x"]);
    expect((await w.api.patch(`/services/${svc.uuid}/envs/bulk`, { variables: [{ key: "A", value: "1" }, { key: "A", value: "2" }] })).status).toBe(422);

    const gone = await w.api.delete(`/services/${svc.uuid}/envs/${created.body.data.uuid}`);
    expect(gone.status).toBe(200);
    const keysNow = (await w.api.get(`/services/${svc.uuid}/envs`)).body.data.map((e: { key: string }) => e.key);
    expect(keysNow).not.toContain("EXTRA");
    expect(keysNow).toContain("MORE");
    expect((await w.api.delete(`/services/${svc.uuid}/envs/${created.body.data.uuid}`)).status).toBe(404);
  });

  it("a generated value a user sets is no longer marked generated", async () => {
    const svc = await ok(create({ docker_compose_raw: CUSTOM }), "custom");
    const res = await w.api.patch(`/services/${svc.uuid}/envs`, { key: "SERVICE_PASSWORD_ADMIN", value: "chosen" });
    expect(res.body.data).toMatchObject({ value: "chosen", is_generated: false });
  });
});

describe("DELETE /services/{uuid}", () => {
  it("deletes the service with its components and variables; flags in the query or body, conflicting ones a 422", async () => {
    const svc = await ok(create({ type: "plausible" }), "svc");
    expect((await w.api.delete(`/services/${svc.uuid}?delete_volumes=true`, { delete_volumes: false })).status).toBe(422);
    const res = await w.api.delete(`/services/${svc.uuid}?delete_volumes=true`);
    expect(res.status).toBe(200);
    expect((await w.api.get(`/services/${svc.uuid}`)).status).toBe(404);
    const row = await prisma().service.findUnique({ where: { uuid: svc.uuid } });
    expect(row).toBeNull();
    expect(await prisma().serviceComponent.count({ where: { service: { uuid: svc.uuid } } })).toBe(0);
  });

  it("a server with services cannot be removed (409)", async () => {
    const other = await appWorld(t, keys);
    const svc = await ok(other.api.post("/services", { ...placement(other), type: "n8n" }), "svc");
    const res = await other.api.delete(`/servers/${other.server.uuid}`);
    expect(res.status).toBe(409);
    expect(res.body.message).toMatch(/service/);
    await ok(other.api.delete(`/services/${svc.uuid}`), "delete");
    expect((await other.api.delete(`/servers/${other.server.uuid}`)).status).toBe(200);
  });
});

describe("networks of a service (/networks/resource/service/{uuid})", () => {
  it("lists the network it joins, attaches a shared network, and forgets the attachment when the service goes", async () => {
    const svc = await ok(create({ type: "uptime-kuma" }), "svc");
    const list = await w.api.get(`/networks/resource/service/${svc.uuid}`);
    expect(list.status, JSON.stringify(list.body)).toBe(200);
    expect(list.body.data.map((n: { role: string }) => n.role)).toEqual(["primary"]);
    const shared = (await ok(w.api.post(`/networks/${w.server.uuid}`, { name: `svc-net-${Date.now()}` }), "network")).data;
    expect((await w.api.post(`/networks/resource/service/${svc.uuid}/attach`, { network_uuid: shared.uuid })).status).toBe(200);
    const after = (await w.api.get(`/networks/resource/service/${svc.uuid}`)).body.data;
    expect(after.map((n: { uuid: string; role: string }) => [n.role, n.uuid])).toContainEqual(["attached", shared.uuid]);
    const row = await prisma().service.findUniqueOrThrow({ where: { uuid: svc.uuid } });
    expect(await prisma().networkAttachment.count({ where: { resourceType: "service", resourceId: row.id } })).toBe(1);
    await ok(w.api.delete(`/services/${svc.uuid}`), "delete");
    expect(await prisma().networkAttachment.count({ where: { resourceType: "service", resourceId: row.id } })).toBe(0);
  });
});

describe("storages", () => {
  it("adds a volume to the first application by default or to a named compose service, lists and deletes; answers say it applies on the next start", async () => {
    const svc = await ok(create({ type: "plausible" }), "svc");
    const res = await w.api.post(`/services/${svc.uuid}/storages`, { name: "extra", mount_path: "/extra" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.message).toMatch(/next start or restart/);
    expect(res.body.data).toMatchObject({ name: "extra", service_name: "plausible", mount_path: "/extra", type: "volume", host_path: null, volume_name: `${svc.uuid}-extra` });
    expect(res.body.uuid).toBe(res.body.data.uuid);
    const db = await w.api.post(`/services/${svc.uuid}/storages`, { name: "pgextra", mount_path: "/extra", service_name: "postgres" });
    expect(db.status).toBe(201);
    expect(db.body.data.service_name).toBe("postgres");
    const list = (await w.api.get(`/services/${svc.uuid}/storages`)).body.data;
    expect(list.map((s: { name: string }) => s.name)).toEqual(["extra", "pgextra"]);
    expect((await w.api.delete(`/services/${svc.uuid}/storages/${res.body.data.uuid}`)).status).toBe(200);
    expect((await w.api.get(`/services/${svc.uuid}/storages`)).body.data.map((s: { name: string }) => s.name)).toEqual(["pgextra"]);
    expect((await w.api.delete(`/services/${svc.uuid}/storages/${res.body.data.uuid}`)).status).toBe(404);
  });

  it("refuses a taken name or path (409), a name the compose file declares (409), an unknown compose service (422), a member's bind mount (403)", async () => {
    const svc = await ok(create({ type: "uptime-kuma" }), "svc");
    await ok(w.api.post(`/services/${svc.uuid}/storages`, { name: "one", mount_path: "/one" }), "one");
    const before = await prisma().serviceStorage.count();
    expect((await w.api.post(`/services/${svc.uuid}/storages`, { name: "one", mount_path: "/two" })).status).toBe(409);
    expect((await w.api.post(`/services/${svc.uuid}/storages`, { name: "two", mount_path: "/one" })).status).toBe(409);
    // uptime-kuma's compose file declares uptime-kuma-data: the same Docker volume name.
    expect((await w.api.post(`/services/${svc.uuid}/storages`, { name: "uptime-kuma-data", mount_path: "/three" })).status).toBe(409);
    const unknown = await w.api.post(`/services/${svc.uuid}/storages`, { name: "four", mount_path: "/four", service_name: "nope" });
    expect(unknown.status).toBe(422);
    expect(Object.keys(unknown.body.errors)).toEqual(["service_name"]);
    expect((await w.api.post(`/services/${svc.uuid}/storages`, { name: "x", mount_path: "relative" })).status).toBe(422);
    const member = await t.newMember(w.team.teamId, "member");
    const project = await prisma().project.findUniqueOrThrow({ where: { uuid: w.project.uuid } });
    await prisma().projectPermission.create({ data: { projectId: project.id, userId: member.userId, level: "full_access" } });
    expect((await t.api(member.token).post(`/services/${svc.uuid}/storages`, { name: "bind", mount_path: "/bind", host_path: "/srv/bind" })).status).toBe(403);
    expect(await prisma().serviceStorage.count()).toBe(before);
  });
});
