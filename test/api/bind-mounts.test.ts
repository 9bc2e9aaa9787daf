/**
 * Bind mounts of server directories (issue 15, security 1): the host-path rule for compose files
 * (storages: applications-envs.test.ts), and who may add bind mounts at all (team owners and
 * admins; members only where the team's owners allow it).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type ApiClient, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, createImageApp, ok, placement, type AppWorld } from "./support/applications.js";

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

const BYPASSES = ["//etc", "/var//run/docker.sock", "///root/.ssh", "/var/lib//docker", "/var", "/home", "/var/spool/cron/crontabs", "/", "/srv/..", "/srv/app/../../etc"];
const short = (src: string) => `services:\n  web:\n    image: nginx:1.27\n    volumes:\n      - '${src}:/data'\n`;
const long = (src: string) => `services:\n  web:\n    image: nginx:1.27\n    volumes:\n      - type: bind\n        source: '${src}'\n        target: /data\n`;
const NO_BIND = "services:\n  web:\n    image: nginx:1.27\n    volumes: ['data:/data']\nvolumes:\n  data: {}\n";

const appCount = () => t.instance.database.prisma.application.count();
const volumeCount = () => t.instance.database.prisma.volume.count();

describe("compose files: the shared host-path rule, 422 and nothing changes", () => {
  it.each(BYPASSES.flatMap((src) => [["short", src], ["long", src]] as const))("create refuses a %s syntax bind of %j", async (syntax, src) => {
    const before = await appCount();
    const res = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: (syntax === "short" ? short : long)(src) });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(["docker_compose_raw"]);
    expect(res.body.errors.docker_compose_raw.join(" ")).toMatch(/system directory/);
    expect(await appCount()).toBe(before);
  });

  it.each(BYPASSES.flatMap((src) => [["short", src], ["long", src]] as const))("PATCH refuses a %s syntax bind of %j, keeping the file", async (syntax, src) => {
    const app = await ok(w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: NO_BIND }), "compose app");
    const res = await w.api.patch(`/applications/${app.uuid}`, { docker_compose_raw: (syntax === "short" ? short : long)(src) });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(res.body.errors.docker_compose_raw.join(" ")).toMatch(/system directory/);
    expect((await w.api.get(`/applications/${app.uuid}`)).body.docker_compose_raw).toBe(NO_BIND);
  });

  it("refuses a top-level volume that binds a server directory through driver_opts", async () => {
    const before = await appCount();
    const raw = "services:\n  web:\n    image: nginx:1.27\n    volumes: ['data:/data']\nvolumes:\n  data:\n    driver: local\n    driver_opts: {type: none, o: bind, device: /etc}\n";
    const res = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: raw });
    expect(res.status).toBe(422);
    expect(res.body.errors.docker_compose_raw.join(" ")).toMatch(/driver_opts is refused/);
    expect(await appCount()).toBe(before);
  });

  it.each(["/srv/app/data", "/opt/app", "/data/uploads", "/mnt/disk1/x"])("accepts an application directory %j", async (src) => {
    expect((await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: long(src) })).status).toBe(201);
  });
});

describe("who may add bind mounts", () => {
  /** A member with full_access on the world's project: may manage its applications. */
  let member: ApiClient;
  let admin: ApiClient;

  beforeAll(async () => {
    const m = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: m.userId, permission_level: "full_access" }), "grant");
    member = t.api(m.token);
    admin = t.api((await t.newMember(w.team.teamId, "admin")).token);
  });

  const setting = async () => (await w.api.get("/teams/current")).body.settings;
  const setAllowed = async (on: boolean) => {
    const res = await w.api.patch("/teams/current/settings", { allow_member_bind_mounts: on });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ message: "Team settings updated.", data: { allow_member_bind_mounts: on } });
  };

  it("GET /teams/current shows the setting, off by default", async () => {
    expect(await setting()).toEqual({ allow_member_bind_mounts: false });
    expect((await member.get(`/teams/${w.team.teamId}`)).body.settings).toEqual({ allow_member_bind_mounts: false });
  });

  it("a member with full_access may add named volumes but not bind mounts (403 with the reason, nothing stored)", async () => {
    const app = await createImageApp(w);
    expect((await member.post(`/applications/${app.uuid}/storages`, { name: "data", mount_path: "/data" })).status).toBe(201);
    const before = await volumeCount();
    const res = await member.post(`/applications/${app.uuid}/storages`, { name: "up", mount_path: "/up", host_path: "/srv/uploads" });
    expect(res.status).toBe(403);
    expect(res.body.message).toMatch(/^Only team owners and admins can add bind mounts of server directories \(\/srv\/uploads\); a team owner can let members add them with PATCH \/api\/v1\/teams\/current\/settings/);
    expect(await volumeCount()).toBe(before);
    // A path the rule refuses is a 422 for anyone, before the role question.
    expect((await member.post(`/applications/${app.uuid}/storages`, { name: "up", mount_path: "/up", host_path: "//etc" })).status).toBe(422);
  });

  it("a member may create compose files without binds, not with them", async () => {
    expect((await member.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: NO_BIND })).status).toBe(201);
    for (const raw of [short("/srv/app/data"), long("/srv/app/data")]) {
      const before = await appCount();
      const res = await member.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: raw });
      expect(res.status).toBe(403);
      expect(res.body.message).toMatch(/Only team owners and admins can add bind mounts/);
      expect(await appCount()).toBe(before);
    }
  });

  it("a member may not add a bind to a compose file by PATCH, but may edit a file keeping the binds an owner put there", async () => {
    const app = await ok(w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: short("/srv/app/data") }), "compose app");
    // The same bind, written another way and with another target: nothing new on the server.
    const edited = long("//srv/app/data/").replace("target: /data", "target: /var/data");
    const kept = await member.patch(`/applications/${app.uuid}`, { docker_compose_raw: edited });
    expect(kept.status, JSON.stringify(kept.body)).toBe(200);
    const added = `${edited}      - /srv/other:/other\n`;
    const res = await member.patch(`/applications/${app.uuid}`, { docker_compose_raw: added });
    expect(res.status).toBe(403);
    expect(res.body.message).toMatch(/\(\/srv\/other\)/);
    expect((await w.api.get(`/applications/${app.uuid}`)).body.docker_compose_raw).toBe(edited);
  });

  it("owners and admins may always add bind mounts", async () => {
    for (const api of [w.api, admin]) {
      const app = await createImageApp(w);
      expect((await api.post(`/applications/${app.uuid}/storages`, { name: "up", mount_path: "/up", host_path: "/srv/uploads" })).status).toBe(201);
      expect((await api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: short("/srv/app/data") })).status).toBe(201);
    }
  });

  it("only an owner changes the setting: admins, members, automation and read-only tokens get 403, bad bodies 422; nothing changes", async () => {
    const automation = t.api(await t.instance.admin.createToken({ teamId: w.team.teamId, name: "automation", scopes: ["read", "write", "deploy"] }));
    const readOnlyOwner = t.api(await t.instance.admin.createToken({ teamId: w.team.teamId, userId: w.team.ownerId, name: "ro", scopes: ["read"] }));
    for (const api of [admin, member, automation]) {
      const res = await api.patch("/teams/current/settings", { allow_member_bind_mounts: true });
      expect(res.status).toBe(403);
      expect(res.body.message).toBe("Only team owners can change the team's settings.");
    }
    expect((await readOnlyOwner.patch("/teams/current/settings", { allow_member_bind_mounts: true })).status).toBe(403);
    for (const body of [{ allow_member_bind_mounts: "yes" }, {}, { allow_member_bind_mounts: true, other: 1 }]) {
      const res = await w.api.patch("/teams/current/settings", body);
      expect(res.status, JSON.stringify(body)).toBe(422);
    }
    expect(await setting()).toEqual({ allow_member_bind_mounts: false });
  });

  it("with the setting on, members add bind mounts too; off again, they cannot", async () => {
    await setAllowed(true);
    try {
      expect(await setting()).toEqual({ allow_member_bind_mounts: true });
      const app = await createImageApp(w);
      expect((await member.post(`/applications/${app.uuid}/storages`, { name: "up", mount_path: "/up", host_path: "/srv/uploads" })).status).toBe(201);
      expect((await member.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: long("/srv/app/data") })).status).toBe(201);
      // The host-path rule holds for everyone, setting or not.
      expect((await member.post(`/applications/${app.uuid}/storages`, { name: "etc", mount_path: "/etc2", host_path: "/var//run/docker.sock" })).status).toBe(422);
    } finally {
      await setAllowed(false);
    }
    const app = await createImageApp(w);
    expect((await member.post(`/applications/${app.uuid}/storages`, { name: "up", mount_path: "/up", host_path: "/srv/uploads" })).status).toBe(403);
  });

  it("the setting belongs to one team: another team's owner changes only its own", async () => {
    const other = await t.newTeam();
    expect((await other.api.patch("/teams/current/settings", { allow_member_bind_mounts: true })).status).toBe(200);
    expect((await other.api.get("/teams/current")).body.settings).toEqual({ allow_member_bind_mounts: true });
    expect(await setting()).toEqual({ allow_member_bind_mounts: false });
  });
});
