import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, createImageApp, ok, type AppWorld } from "./support/applications.js";

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

describe("environment variables", () => {
  it("creates, lists with values, masks them in the detail, and seals values at rest", async () => {
    const app = await createImageApp(w);
    const secret = "s3cr3t-" + Math.random().toString(36).slice(2);
    const created = await w.api.post(`/applications/${app.uuid}/envs`, { key: "DATABASE_URL", value: `postgres://u:${secret}@db/app` });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // One rule for the .../envs answers (issue 15): the owner may read the value, so the create shows it as the list does.
    expect(created.body).toEqual({
      message: "Environment variable created.",
      // The new variable's uuid also at the top, where Coolify's clients read it (docs/compatibility.md).
      uuid: created.body.data.uuid,
      data: {
        uuid: expect.stringMatching(UUID),
        key: "DATABASE_URL",
        value: `postgres://u:${secret}@db/app`,
        is_build_time: false,
        is_preview: false,
        created_at: expect.stringMatching(ISO),
        updated_at: expect.stringMatching(ISO),
      },
    });
    const build = await w.api.post(`/applications/${app.uuid}/envs`, { key: "NODE_ENV", value: "production", is_build_time: true });
    expect(build.status).toBe(201);
    const preview = await w.api.post(`/applications/${app.uuid}/envs`, { key: "NODE_ENV", value: "preview", is_preview: true });
    expect(preview.status).toBe(201);

    const list = await w.api.get(`/applications/${app.uuid}/envs`);
    expect(list.status).toBe(200);
    expect(list.body.data.map((e: any) => [e.key, e.value, e.is_build_time, e.is_preview])).toEqual([
      ["DATABASE_URL", `postgres://u:${secret}@db/app`, false, false],
      ["NODE_ENV", "production", true, false],
      ["NODE_ENV", "preview", false, true],
    ]);
    const paged = await w.api.get(`/applications/${app.uuid}/envs`, { per_page: 2, page: 2 });
    expect(paged.body.meta).toEqual({ current_page: 2, per_page: 2, total: 3, last_page: 2 });

    // The application's detail masks them.
    const detail = await w.api.get(`/applications/${app.uuid}`);
    expect(detail.body.envs.map((e: any) => [e.key, e.value])).toEqual([["DATABASE_URL", null], ["NODE_ENV", null], ["NODE_ENV", null]]);
    expect(JSON.stringify(detail.body)).not.toContain(secret);

    // Stored sealed: the plaintext is nowhere in the row.
    const rows = await t.instance.database.prisma.envVar.findMany({ where: { key: "DATABASE_URL" } });
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(r.value).toMatch(/^v1:/);
      expect(r.value).not.toContain(secret);
    }
  });

  it("409 for a duplicate key of the same kind; 422 for bad keys and values, creating nothing", async () => {
    const app = await createImageApp(w);
    await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "PORT", value: "3000" }), "env");
    const dup = await w.api.post(`/applications/${app.uuid}/envs`, { key: "PORT", value: "4000" });
    expect(dup.status).toBe(409);
    expect(dup.body.message).toMatch(/PORT already exists/);
    const count = () => t.instance.database.prisma.envVar.count();
    const before = await count();
    for (const key of ["", "1PORT", "A B", "A=B", "$(id)", "A;B", "A-B", "PATH\n", "ÄÖ", "x".repeat(256), "--help"]) {
      const res = await w.api.post(`/applications/${app.uuid}/envs`, { key, value: "v" });
      expect(res.status, JSON.stringify(key)).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(["key"]);
    }
    for (const value of ["nul\u0000byte", "x".repeat(65_537), 42, null]) {
      const res = await w.api.post(`/applications/${app.uuid}/envs`, { key: "OK", value });
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(["value"]);
    }
    expect(await count()).toBe(before);
    // Values may hold anything a process accepts: quotes, newlines, shell syntax.
    const odd = "line1\nline2 'quoted' \"double\" $(not run) `nor this` ; | &";
    expect((await w.api.post(`/applications/${app.uuid}/envs`, { key: "ODD", value: odd })).status).toBe(201);
    const listed = (await w.api.get(`/applications/${app.uuid}/envs`)).body.data.find((e: any) => e.key === "ODD");
    expect(listed.value).toBe(odd);
  });

  it("PATCH .../envs changes one variable by key", async () => {
    const app = await createImageApp(w);
    await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "MODE", value: "a" }), "env");
    await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "MODE", value: "p", is_preview: true }), "env");
    const res = await w.api.patch(`/applications/${app.uuid}/envs`, { key: "MODE", value: "b" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ message: "Environment variable updated.", data: { key: "MODE", value: "b", is_preview: false } });
    const flag = await w.api.patch(`/applications/${app.uuid}/envs`, { key: "MODE", is_build_time: true, is_preview: true });
    expect(flag.status).toBe(200);
    const list = (await w.api.get(`/applications/${app.uuid}/envs`)).body.data;
    expect(list.map((e: any) => [e.key, e.value, e.is_build_time, e.is_preview])).toEqual([
      ["MODE", "b", false, false],
      ["MODE", "p", true, true],
    ]);
    expect((await w.api.patch(`/applications/${app.uuid}/envs`, { key: "MISSING", value: "x" })).status).toBe(404);
    const neither = await w.api.patch(`/applications/${app.uuid}/envs`, { key: "MODE" });
    expect(neither.status).toBe(422);
  });

  it("PATCH .../envs/bulk upserts all or nothing", async () => {
    const app = await createImageApp(w);
    await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "KEEP", value: "1", is_build_time: true }), "env");
    const res = await w.api.patch(`/applications/${app.uuid}/envs/bulk`, {
      variables: [
        { key: "KEEP", value: "2" },
        { key: "NEW_ONE", value: "n", is_build_time: true },
        { key: "NEW_ONE", value: "np", is_preview: true },
      ],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.message).toBe("3 environment variable(s) saved.");
    expect(res.body.data.map((e: any) => [e.key, e.value, e.is_preview])).toEqual([
      ["KEEP", "2", false],
      ["NEW_ONE", "n", false],
      ["NEW_ONE", "np", true],
    ]);
    const list = (await w.api.get(`/applications/${app.uuid}/envs`)).body.data;
    expect(list.map((e: any) => [e.key, e.value, e.is_build_time, e.is_preview])).toEqual([
      ["KEEP", "2", true, false],
      ["NEW_ONE", "n", true, false],
      ["NEW_ONE", "np", false, true],
    ]);

    // One bad entry: nothing changes.
    const bad = await w.api.patch(`/applications/${app.uuid}/envs/bulk`, { variables: [{ key: "KEEP", value: "3" }, { key: "BAD KEY", value: "x" }] });
    expect(bad.status).toBe(422);
    expect(Object.keys(bad.body.errors)).toEqual(["variables.1.key"]);
    const dup = await w.api.patch(`/applications/${app.uuid}/envs/bulk`, { variables: [{ key: "KEEP", value: "3" }, { key: "KEEP", value: "4" }] });
    expect(dup.status).toBe(422);
    expect((await w.api.patch(`/applications/${app.uuid}/envs/bulk`, { variables: [] })).status).toBe(422);
    expect((await w.api.get(`/applications/${app.uuid}/envs`)).body.data).toEqual(list);
  });

  it("one rule for values in every .../envs answer: shown to those who may read them, null for the rest (create, patch, bulk, list)", async () => {
    const app = await createImageApp(w);
    const answers = async (api: typeof w.api, key: string) => {
      const created = await api.post(`/applications/${app.uuid}/envs`, { key, value: `${key}-1` });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const patched = await api.patch(`/applications/${app.uuid}/envs`, { key, value: `${key}-2` });
      expect(patched.status).toBe(200);
      const bulk = await api.patch(`/applications/${app.uuid}/envs/bulk`, { variables: [{ key, value: `${key}-3` }] });
      expect(bulk.status).toBe(200);
      return [created.body.data.value, patched.body.data.value, bulk.body.data[0].value];
    };
    // A member with full access on the environment, token with read: the values, as GET shows them.
    const full = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: full.userId, permission_level: "full_access" }), "grant");
    expect(await answers(t.api(full.token), "FULL")).toEqual(["FULL-1", "FULL-2", "FULL-3"]);
    expect((await t.api(full.token).get(`/applications/${app.uuid}/envs`)).body.data.find((e: any) => e.key === "FULL").value).toBe("FULL-3");
    // Write-only tokens cannot GET the values, so their mutations do not get them back either
    // (an owner's and a full-access member's alike).
    const ownerWriteOnly = await t.newMember(w.team.teamId, "owner", ["write"]);
    expect(await answers(t.api(ownerWriteOnly.token), "OWNER_W")).toEqual([null, null, null]);
    expect((await t.api(ownerWriteOnly.token).get(`/applications/${app.uuid}/envs`)).status).toBe(403);
    const memberWriteOnly = await t.newMember(w.team.teamId, "member", ["write"]);
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: memberWriteOnly.userId, permission_level: "full_access" }), "grant");
    expect(await answers(t.api(memberWriteOnly.token), "MEMBER_W")).toEqual([null, null, null]);
    // The values were stored all the same.
    const list = (await w.api.get(`/applications/${app.uuid}/envs`)).body.data.map((e: any) => [e.key, e.value]);
    expect(list).toEqual([
      ["FULL", "FULL-3"],
      ["OWNER_W", "OWNER_W-3"],
      ["MEMBER_W", "MEMBER_W-3"],
    ]);
  });

  it("DELETE .../envs/{env_uuid} removes one; another application's variable is 404", async () => {
    const app = await createImageApp(w);
    const other = await createImageApp(w);
    const env = (await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "GONE", value: "x" }), "env")).data;
    const theirs = (await ok(w.api.post(`/applications/${other.uuid}/envs`, { key: "STAYS", value: "x" }), "env")).data;
    expect((await w.api.delete(`/applications/${app.uuid}/envs/${theirs.uuid}`)).status).toBe(404);
    const res = await w.api.delete(`/applications/${app.uuid}/envs/${env.uuid}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: "Environment variable deleted." });
    expect((await w.api.get(`/applications/${app.uuid}/envs`)).body.data).toEqual([]);
    expect((await w.api.delete(`/applications/${app.uuid}/envs/${env.uuid}`)).status).toBe(404);
    expect((await w.api.get(`/applications/${other.uuid}/envs`)).body.data).toHaveLength(1);
  });
});

describe("storages", () => {
  it("adds named volumes and bind mounts, lists them, and shows them in the detail", async () => {
    const app = await createImageApp(w);
    const vol = await w.api.post(`/applications/${app.uuid}/storages`, { name: "data", mount_path: "/var/lib/app" });
    expect(vol.status, JSON.stringify(vol.body)).toBe(201);
    expect(vol.body).toEqual({
      message: "Storage created.",
      // The new storage's uuid also at the top, where Coolify's clients read it (docs/compatibility.md).
      uuid: vol.body.data.uuid,
      data: { uuid: expect.stringMatching(UUID), name: "data", mount_path: "/var/lib/app", host_path: null, type: "volume", volume_name: `${app.uuid}-data`, created_at: expect.stringMatching(ISO) },
    });
    const bind = await w.api.post(`/applications/${app.uuid}/storages`, { name: "uploads", mount_path: "/srv/uploads", host_path: "/srv/capstan/uploads/" });
    expect(bind.status, JSON.stringify(bind.body)).toBe(201);
    // Stored and shown in its normal form (issue 15: the form that is checked is the form that is mounted).
    expect(bind.body.data).toMatchObject({ type: "bind", host_path: "/srv/capstan/uploads", volume_name: null });
    const list = await w.api.get(`/applications/${app.uuid}/storages`);
    expect(list.body.data.map((s: any) => s.name)).toEqual(["data", "uploads"]);
    expect((await w.api.get(`/applications/${app.uuid}`)).body.storages).toEqual(list.body.data);
  });

  it("409 for a second storage with the same name or mount path", async () => {
    const app = await createImageApp(w);
    await ok(w.api.post(`/applications/${app.uuid}/storages`, { name: "data", mount_path: "/data" }), "storage");
    const name = await w.api.post(`/applications/${app.uuid}/storages`, { name: "data", mount_path: "/other" });
    expect(name.status).toBe(409);
    const path = await w.api.post(`/applications/${app.uuid}/storages`, { name: "other", mount_path: "/data" });
    expect(path.status).toBe(409);
    // the same name on another application is fine
    const other = await createImageApp(w);
    expect((await w.api.post(`/applications/${other.uuid}/storages`, { name: "data", mount_path: "/data" })).status).toBe(201);
  });

  const VOLUME_NAMES = ["../etc", "a/b", "-v", "$(id)", "a b", "x".repeat(65), ".hidden", "", "a:b", "a;b"];
  const MOUNT_PATHS = ["relative", "/", "/data/../etc", "/data:/host", "/a,b", "/data\nx", "/./x", "", "/x:ro"];
  const HOST_PATHS = [
    "/",
    "/etc",
    "/etc/",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/proc/1/root",
    "/root/.ssh",
    "/var/lib/docker/volumes",
    "/home/../etc",
    "/usr/bin",
    "/sys",
    "/dev/sda",
    "/boot",
    "/var/lib/capstan-agent",
    "relative/path",
    "/srv/a:/etc",
    // Disguised and ancestor paths (issue 15, security 1)
    "//etc",
    "/var//run/docker.sock",
    "///root/.ssh",
    "/var/lib//docker",
    "/var",
    "/home",
    "/var/spool/cron/crontabs",
    "/srv/..",
    "/srv/app/../../etc",
    "/tmp",
    "/srv/a,b",
    "/srv/a\u0000b",
  ];
  it.each([
    ...VOLUME_NAMES.map((v) => ["name", v] as const),
    ...MOUNT_PATHS.map((v) => ["mount_path", v] as const),
    ...HOST_PATHS.map((v) => ["host_path", v] as const),
  ])("refuses %s %j with 422, creating nothing", async (field, value) => {
    const app = await createImageApp(w);
    const count = () => t.instance.database.prisma.volume.count();
    const before = await count();
    const body: Record<string, string> = { name: "data", mount_path: "/data", [field]: value };
    const res = await w.api.post(`/applications/${app.uuid}/storages`, body);
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([field]);
    expect(await count()).toBe(before);
  });

  it("DELETE .../storages/{storage_uuid}", async () => {
    const app = await createImageApp(w);
    const other = await createImageApp(w);
    const s = (await ok(w.api.post(`/applications/${app.uuid}/storages`, { name: "data", mount_path: "/data" }), "storage")).data;
    expect((await w.api.delete(`/applications/${other.uuid}/storages/${s.uuid}`)).status).toBe(404);
    const res = await w.api.delete(`/applications/${app.uuid}/storages/${s.uuid}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: "Storage deleted." });
    expect((await w.api.get(`/applications/${app.uuid}/storages`)).body.data).toEqual([]);
    expect((await w.api.delete(`/applications/${app.uuid}/storages/${s.uuid}`)).status).toBe(404);
  });
});
