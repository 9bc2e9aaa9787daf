import { randomBytes } from "node:crypto";
import { lookup } from "node:dns/promises";
import net from "node:net";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type ApiResponse, type TeamFixture, type TestInstance } from "./harness.js";
import { readFile, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { checkout } from "../../control-plane/src/services/template-sources/checkout.js";
import { GitRepos, startGitDaemon, startHttpGit, type GitServer, type HttpGitServer } from "../support/git-server.js";

/**
 * /template-sources (spec 4.11) against real git servers started here: `git daemon` and smart
 * HTTP (`git http-backend`), one of them requiring HTTP basic credentials like a private
 * repository. The instance allows private endpoints (the servers are on loopback).
 */
let t: TestInstance;
let team: TeamFixture;
let repos: GitRepos;
let daemon: GitServer;
let http: HttpGitServer;
let privateHttp: HttpGitServer;
const TOKEN = `tok-${randomBytes(16).toString("hex")}`;
/** Every response body this file received: the token must never be in one. */
const seen: string[] = [];

const track = async <T = any>(p: Promise<ApiResponse<T>>): Promise<ApiResponse<T>> => {
  const r = await p;
  seen.push(JSON.stringify(r.body ?? null));
  return r;
};

const template = (slogan: string, tags: string, image = "traefik/whoami:v1.10") =>
  `# documentation: https://example.org/docs\n# slogan: ${slogan}\n# tags: ${tags}\n# logo: svgs/x.svg\n# port: 80\n\nservices:\n  web:\n    image: ${image}\n    environment:\n      - SERVICE_URL_WEB_80\n`;

const FILES = {
  "whoami.yaml": template("Answers every request with what it received.", "test, http"),
  "echo.yaml": template("Echoes.", "echo,debug"),
  "no-slogan.yaml": "# documentation: https://example.org\n# tags: broken\n\nservices:\n  web:\n    image: nginx:1.27-alpine\n",
  "draft.yaml": "# documentation: https://example.org\n# slogan: A draft\n# ignore: true\n\nservices: {}\n",
  "README.md": "not a template\n",
  "nested/inner.yaml": template("In a folder.", "nested"),
};

async function settled(uuid: string): Promise<any> {
  await t.instance.services.templateSources.idle();
  const r = await track(team.api.get(`/template-sources/${uuid}`));
  expect(r.status).toBe(200);
  return r.body;
}

async function create(body: Record<string, unknown>): Promise<any> {
  const r = await track(team.api.post("/template-sources", body));
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.data;
}

beforeAll(async () => {
  repos = await GitRepos.create();
  await repos.repo("public.git", FILES);
  await repos.repo("other-branch.git", { "a/b/only.yaml": template("On the other branch.", "branch") }, { branch: "release" });
  await repos.repo("private.git", { "secret.yaml": template("Private one.", "private") });
  await repos.repo("collide.git", { "n8n.yaml": template("Not the built-in one.", "automation"), "only-here.yaml": template("Only in this source.", "unique") });
  daemon = await startGitDaemon(repos.base);
  http = await startHttpGit(repos.base);
  privateHttp = await startHttpGit(repos.base, { auth: { username: "x-access-token", token: TOKEN } });
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
  team = await t.newTeam("sources");
}, 60_000);

afterAll(async () => {
  await t?.close();
  await Promise.all([daemon?.stop(), http?.stop(), privateHttp?.stop()]);
  await repos?.cleanup();
  expect(seen.join("\n")).not.toContain(TOKEN);
});

describe("template sources", () => {
  it("create answers pending, dispatches a sync, and the detail lists templates with slogans, tags and lint; broken ones with reasons", async () => {
    const r = await track(team.api.post("/template-sources", { name: "Public Catalog", repository_url: http.url("public.git") }));
    expect(r.status).toBe(201);
    expect(r.body.message).toMatch(/sync/i);
    expect(r.body.data).toMatchObject({ name: "Public Catalog", sync_status: "pending", slug: "public-catalog", branch: "main", folder_path: "", has_auth_token: false, is_enabled: true });
    const d = await settled(r.body.data.uuid);
    expect(d.sync_status).toBe("synced");
    expect(d.sync_error).toBeNull();
    expect(d.last_synced_at).toEqual(expect.any(String));
    expect(d.synced_commit).toMatch(/^[0-9a-f]{40}$/);
    expect(d.template_count).toBe(2);
    expect(d.templates).toEqual([
      { name: "echo", slogan: "Echoes.", tags: "echo,debug", logo: "svgs/x.svg", documentation: "https://example.org/docs", lint: "ok" },
      { name: "whoami", slogan: "Answers every request with what it received.", tags: "test,http", logo: "svgs/x.svg", documentation: "https://example.org/docs", lint: "ok" },
    ]);
    expect(d.broken_templates).toEqual([{ file: "no-slogan.yaml", lint: expect.stringMatching(/slogan/) }]);
    expect(d.ignored_templates).toEqual(["draft.yaml"]);
    expect(d.broken_count).toBe(1);
    const list = await track(team.api.get("/template-sources"));
    expect(list.body.data.find((s: any) => s.uuid === d.uuid)).toMatchObject({ template_count: 2, sync_status: "synced" });
    expect(list.body.data[0].templates).toBeUndefined();
  });

  it("GET /services/templates lists an enabled source's templates next to the built-in ones; a name the catalog has is slug/name", async () => {
    const src = await create({ name: "Collide", repository_url: http.url("collide.git") });
    expect((await settled(src.uuid)).sync_status).toBe("synced");
    const list = (await track(team.api.get("/services/templates"))).body.data as { name: string; source: string; slogan: string; tags: string }[];
    expect(list.find((x) => x.name === "only-here")).toMatchObject({ source: "collide", slogan: "Only in this source.", tags: "unique" });
    expect(list.find((x) => x.name === "collide/n8n")).toMatchObject({ source: "collide", slogan: "Not the built-in one." });
    expect(list.find((x) => x.name === "n8n")).toMatchObject({ source: "built-in" });
    expect((await track(team.api.get("/services/templates", { tag: "unique" }))).body.data.map((x: { name: string }) => x.name)).toEqual(["only-here"]);
    // Another team does not see them; a disabled source's templates are not offered.
    const stranger = await t.newTeam("stranger");
    expect((await track(stranger.api.get("/services/templates"))).body.data.some((x: { source: string }) => x.source !== "built-in")).toBe(false);
    expect((await track(team.api.put(`/template-sources/${src.uuid}`, { is_enabled: false }))).status).toBe(200);
    expect((await track(team.api.get("/services/templates"))).body.data.some((x: { source: string }) => x.source === "collide")).toBe(false);
    expect((await track(team.api.delete(`/template-sources/${src.uuid}`))).status).toBe(200);
  });

  it("git:// works too, and branch and folder_path choose what is read", async () => {
    const a = await create({ name: "Daemon nested", repository_url: daemon.url("public.git"), folder_path: "/nested/" });
    expect(a.folder_path).toBe("nested");
    expect((await settled(a.uuid)).templates.map((x: any) => x.name)).toEqual(["inner"]);
    const b = await create({ name: "Release branch", repository_url: http.url("other-branch.git"), branch: "release", folder_path: "a/b" });
    const db = await settled(b.uuid);
    expect(db).toMatchObject({ sync_status: "synced", template_count: 1 });
    expect(db.templates[0]).toMatchObject({ name: "only", tags: "branch" });
    const c = await create({ name: "Missing branch", repository_url: http.url("other-branch.git") });
    expect(await settled(c.uuid)).toMatchObject({ sync_status: "failed", sync_error: expect.stringMatching(/main/), template_count: 0 });
    const d = await create({ name: "Missing folder", repository_url: http.url("public.git"), folder_path: "nope" });
    expect(await settled(d.uuid)).toMatchObject({ sync_status: "failed", sync_error: expect.stringMatching(/nope does not exist/) });
  });

  it("a private repository needs the token: without it the sync fails, with it it syncs; the token is never in a URL, a response or sync_error, and is sealed at rest", async () => {
    const without = await create({ name: "Private without", repository_url: privateHttp.url("private.git") });
    const f = await settled(without.uuid);
    expect(f.sync_status).toBe("failed");
    expect(f.sync_error).toMatch(/git clone failed/);
    const wrong = await create({ name: "Private wrong", repository_url: privateHttp.url("private.git"), auth_token: `${TOKEN}x` });
    const w = await settled(wrong.uuid);
    expect(w.sync_status).toBe("failed");
    expect(w.sync_error).not.toContain(TOKEN);
    expect(w.sync_error).not.toContain(Buffer.from(`x-access-token:${TOKEN}x`).toString("base64"));

    const before = privateHttp.requests.length;
    const withToken = await create({ name: "Private with", repository_url: privateHttp.url("private.git"), auth_token: TOKEN });
    expect(withToken.has_auth_token).toBe(true);
    expect(JSON.stringify(withToken)).not.toContain(TOKEN);
    const s = await settled(withToken.uuid);
    expect(s).toMatchObject({ sync_status: "synced", template_count: 1 });
    const reqs = privateHttp.requests.slice(before);
    expect(reqs.some((q) => q.authorized)).toBe(true);
    expect(reqs.every((q) => !q.url.includes(TOKEN))).toBe(true);
    // Sealed at rest.
    const row = await t.instance.database.prisma.templateSource.findUniqueOrThrow({ where: { uuid: withToken.uuid } });
    expect(row.authToken).not.toContain(TOKEN);
    expect(t.instance.box.open(row.authToken!)).toBe(TOKEN);

    // The token added later by PUT makes the failed source sync.
    const put = await track(team.api.put(`/template-sources/${without.uuid}`, { auth_token: TOKEN }));
    expect(put.status).toBe(200);
    expect(put.body.data).toMatchObject({ has_auth_token: true, sync_status: "pending" });
    expect(await settled(without.uuid)).toMatchObject({ sync_status: "synced", sync_error: null });
  });

  it("sync and sync-all: enabled sources only, counted; a second sync of a running one starts no second clone", async () => {
    const other = await t.newTeam("sync-all");
    const mk = async (name: string) => (await other.api.post("/template-sources", { name, repository_url: http.url("public.git") })).body.data;
    const one = await mk("one");
    const two = await mk("two");
    await t.instance.services.templateSources.idle();
    expect((await other.api.put(`/template-sources/${two.uuid}`, { is_enabled: false })).body.data.is_enabled).toBe(false);
    const all = await track(other.api.post("/template-sources/sync-all"));
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ count: 1, message: expect.stringMatching(/1 template source/) });
    await t.instance.services.templateSources.idle();
    const rowsAfter = await t.instance.database.prisma.templateSource.findMany({ where: { teamId: other.teamId }, orderBy: { id: "asc" } });
    expect(rowsAfter[0]!.lastSyncedAt!.getTime()).toBeGreaterThan(rowsAfter[1]!.lastSyncedAt!.getTime());
    const synced = await track(other.api.post(`/template-sources/${one.uuid}/sync`));
    expect(synced.status).toBe(200);
    expect(synced.body.message).toMatch(/dispatched/);
    // Disabled sources can still be synced one by one.
    expect((await other.api.post(`/template-sources/${two.uuid}/sync`)).body.message).toMatch(/dispatched/);
    await t.instance.services.templateSources.idle();

    // A server that accepts and never answers: the sync stays running.
    const connections: net.Socket[] = [];
    const hang = net.createServer((s) => connections.push(s));
    await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
    const port = (hang.address() as net.AddressInfo).port;
    try {
      const slow = (await other.api.post("/template-sources", { name: "slow", repository_url: `http://127.0.0.1:${port}/slow.git` })).body.data;
      await expect.poll(() => connections.length, { timeout: 10_000 }).toBe(1);
      expect((await other.api.get(`/template-sources/${slow.uuid}`)).body.sync_status).toBe("syncing");
      const again = await track(other.api.post(`/template-sources/${slow.uuid}/sync`));
      expect(again.status).toBe(200);
      expect(again.body.message).toMatch(/already/);
      const all2 = await track(other.api.post("/template-sources/sync-all"));
      expect(all2.body.count).toBe(1); // "one"; "slow" is running, "two" disabled
      await new Promise((r) => setTimeout(r, 500));
      expect(connections.length).toBe(1);
      for (const c of connections) c.destroy();
      await t.instance.services.templateSources.idle();
      expect((await other.api.get(`/template-sources/${slow.uuid}`)).body).toMatchObject({ sync_status: "failed", sync_error: expect.stringMatching(/git clone failed/) });
    } finally {
      for (const c of connections) c.destroy();
      hang.close();
    }
  }, 60_000);

  it("PUT changes fields and answers the source; DELETE removes it; both 404 afterwards", async () => {
    const s = await create({ name: "To change", repository_url: http.url("public.git") });
    await settled(s.uuid);
    const r = await track(team.api.put(`/template-sources/${s.uuid}`, { name: "Changed name", is_enabled: false }));
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ name: "Changed name", slug: "to-change", is_enabled: false, sync_status: "synced" });
    const f = await track(team.api.put(`/template-sources/${s.uuid}`, { folder_path: "nested" }));
    expect(f.body.data.sync_status).toBe("pending");
    expect(await settled(s.uuid)).toMatchObject({ sync_status: "synced", template_count: 1 });
    const del = await track(team.api.delete(`/template-sources/${s.uuid}`));
    expect(del.status).toBe(200);
    expect(del.body.message).toMatch(/unaffected/);
    expect((await team.api.get(`/template-sources/${s.uuid}`)).status).toBe(404);
    expect((await team.api.put(`/template-sources/${s.uuid}`, { name: "x" })).status).toBe(404);
    expect((await team.api.delete(`/template-sources/${s.uuid}`)).status).toBe(404);
  });

  it("another team's source is a 404 on every route; members read, only owners and admins change", async () => {
    const s = await create({ name: "Mine", repository_url: http.url("public.git") });
    await settled(s.uuid);
    const other = await t.newTeam("intruder");
    for (const [method, path] of [
      ["get", `/template-sources/${s.uuid}`],
      ["put", `/template-sources/${s.uuid}`],
      ["delete", `/template-sources/${s.uuid}`],
      ["post", `/template-sources/${s.uuid}/sync`],
    ] as const) {
      const r = await (other.api as any)[method](path, method === "put" ? { name: "hijacked" } : undefined);
      expect(r.status, `${method} ${path}`).toBe(404);
    }
    expect((await other.api.get("/template-sources")).body.data).toEqual([]);
    expect((await other.api.post("/template-sources/sync-all")).body.count).toBe(0);
    const member = await t.newMember(team.teamId, "member");
    const m = t.api(member.token);
    expect((await m.get(`/template-sources/${s.uuid}`)).status).toBe(200);
    expect((await m.post(`/template-sources/${s.uuid}/sync`)).status).toBe(403);
    expect((await m.put(`/template-sources/${s.uuid}`, { name: "x" })).status).toBe(403);
    expect((await m.post("/template-sources", { name: "x", repository_url: http.url("public.git") })).status).toBe(403);
    const reader = await t.newMember(team.teamId, "admin", ["read"]);
    expect((await t.api(reader.token).post(`/template-sources/${s.uuid}/sync`)).status).toBe(403);
    expect((await t.api(reader.token).get("/template-sources")).status).toBe(200);
  });

  it("bad input is a 422 {message, errors} and creates nothing", async () => {
    const count = async () => t.instance.database.prisma.templateSource.count({ where: { teamId: team.teamId } });
    const before = await count();
    const bad: [Record<string, unknown>, string][] = [
      [{ repository_url: http.url("public.git") }, "name"],
      [{ name: "x" }, "repository_url"],
      [{ name: "x", repository_url: "ssh://git@example.com/a/b.git" }, "repository_url"],
      [{ name: "x", repository_url: "git@github.com:acme/templates.git" }, "repository_url"],
      [{ name: "x", repository_url: "file:///etc" }, "repository_url"],
      [{ name: "x", repository_url: "ext::sh -c id" }, "repository_url"],
      [{ name: "x", repository_url: `https://user:${TOKEN}@example.com/a.git` }, "repository_url"],
      [{ name: "x", repository_url: "https://example.com/a.git?x=1" }, "repository_url"],
      [{ name: "x", repository_url: "https://example.com/a.git", branch: "--upload-pack=id" }, "branch"],
      [{ name: "x", repository_url: "https://example.com/a.git", branch: "a..b" }, "branch"],
      [{ name: "x", repository_url: "https://example.com/a.git", folder_path: "../etc" }, "folder_path"],
      [{ name: "x", repository_url: "https://example.com/a.git", folder_path: "a/../../b" }, "folder_path"],
      [{ name: "x", repository_url: "https://example.com/a.git", auth_token: "has space" }, "auth_token"],
      [{ name: "!!!", repository_url: "https://example.com/a.git" }, "name"],
      [{ name: "x", repository_url: "https://example.com/a.git", unknown: 1 }, "unknown"],
    ];
    for (const [body, field] of bad) {
      const r = await track(team.api.post("/template-sources", body));
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(r.body.message).toEqual(expect.any(String));
      expect(Object.keys(r.body.errors).join(","), JSON.stringify(body)).toContain(field);
    }
    const s = await create({ name: "Valid", repository_url: http.url("public.git") });
    expect((await track(team.api.put(`/template-sources/${s.uuid}`, {}))).status).toBe(422);
    expect((await track(team.api.put(`/template-sources/${s.uuid}`, { repository_url: "ssh://x/y" }))).status).toBe(422);
    expect((await track(team.api.put(`/template-sources/${s.uuid}`, { is_enabled: "yes" }))).status).toBe(422);
    // The slug made from the name is unique in the team.
    expect((await track(team.api.post("/template-sources", { name: "valid!", repository_url: http.url("public.git") }))).status).toBe(409);
    expect(await count()).toBe(before + 1);
    await settled(s.uuid);
  });

  it("without the private-endpoint opt-out, loopback hosts are refused when saved and when synced", async () => {
    const strict = await startTestInstance();
    try {
      const other = await strict.newTeam("strict");
      const r = await other.api.post("/template-sources", { name: "loop", repository_url: http.url("public.git") });
      expect(r.status).toBe(422);
      expect(r.body.errors.repository_url[0]).toMatch(/PLATFORM_ALLOW_PRIVATE_ENDPOINTS/);
      const named = await other.api.post("/template-sources", { name: "named", repository_url: `http://localhost.:${http.port}/public.git` });
      expect(named.status).toBe(422);
      // A name that resolves to loopback (this machine's own name here, or localhost's alias
      // below) passes the save and fails at the sync, before any connection.
      const name = (await lookup(hostname())).address.startsWith("127.") ? hostname() : "localhost";
      const before = http.requests.length;
      const sneaky = await other.api.post("/template-sources", { name: "sneaky", repository_url: `http://${name}:${http.port}/public.git` });
      if (name === "localhost") {
        expect(sneaky.status).toBe(422);
        return;
      }
      expect(sneaky.status).toBe(201);
      await strict.instance.services.templateSources.idle();
      const d = (await other.api.get(`/template-sources/${sneaky.body.data.uuid}`)).body;
      expect(d).toMatchObject({ sync_status: "failed", sync_error: expect.stringMatching(/resolves to 127\..*PLATFORM_ALLOW_PRIVATE_ENDPOINTS/) });
      expect(http.requests.length).toBe(before);
    } finally {
      await strict.close();
    }
  });

  it("a sync interrupted by a restart does not stay syncing: a stale row is synced again on start, a running one is put back on stop", async () => {
    const s = await create({ name: "Restarted", repository_url: http.url("public.git") });
    await settled(s.uuid);
    // As a crashed process leaves it: syncing, its heartbeat long past.
    await t.instance.database.prisma.templateSource.update({
      where: { uuid: s.uuid },
      data: { syncStatus: "syncing", syncHeartbeatAt: new Date(Date.now() - 3_600_000), templateCount: 0, templates: "[]" },
    });
    await t.restart();
    await expect.poll(async () => (await team.api.get(`/template-sources/${s.uuid}`)).body.sync_status, { timeout: 20_000 }).toBe("synced");
    expect((await settled(s.uuid)).template_count).toBe(2);

    // A sync running when the control plane stops is put back to pending, then synced by the next start.
    const connections: net.Socket[] = [];
    const hang = net.createServer((c) => connections.push(c));
    await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
    try {
      const port = (hang.address() as net.AddressInfo).port;
      await team.api.put(`/template-sources/${s.uuid}`, { repository_url: `http://127.0.0.1:${port}/x.git` });
      await expect.poll(() => connections.length, { timeout: 10_000 }).toBe(1);
      await t.restart(0);
      // The new start syncs it again: a second connection to the hanging server.
      await expect.poll(() => connections.length, { timeout: 10_000 }).toBe(2);
      expect((await team.api.get(`/template-sources/${s.uuid}`)).body.sync_status).toBe("syncing");
      await team.api.put(`/template-sources/${s.uuid}`, { repository_url: http.url("public.git") });
      for (const c of connections) c.destroy();
      // Changed during its sync: the result is dropped and it syncs again at once (well before the 15 s sweep).
      await expect.poll(async () => (await team.api.get(`/template-sources/${s.uuid}`)).body.sync_status, { timeout: 5_000 }).toBe("synced");
      expect((await settled(s.uuid)).template_count).toBe(2);
    } finally {
      for (const c of connections) c.destroy();
      hang.close();
    }
  }, 60_000);

  it("the clone has a size limit and a timeout, and its temp directory is always removed", async () => {
    const temps = async () => (await readdir(tmpdir())).filter((n) => n.startsWith("capstan-template-source-")).length;
    const before = await temps();
    await expect(checkout({ url: http.url("public.git"), branch: "main", token: null, allowPrivate: true, limits: { timeoutMs: 60_000, maxBytes: 2_000 } })).rejects.toThrow(
      /larger than 2000 bytes/,
    );
    const connections: net.Socket[] = [];
    const hang = net.createServer((c) => connections.push(c));
    await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
    try {
      const port = (hang.address() as net.AddressInfo).port;
      const started = Date.now();
      await expect(checkout({ url: `http://127.0.0.1:${port}/x.git`, branch: "main", token: null, allowPrivate: true, limits: { timeoutMs: 1_000, maxBytes: 1e9 } })).rejects.toThrow(
        /longer than 1 s/,
      );
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      for (const c of connections) c.destroy();
      hang.close();
    }
    const ok = await checkout({ url: http.url("public.git"), branch: "main", token: null, allowPrivate: true });
    expect(ok.commit).toMatch(/^[0-9a-f]{40}$/);
    await ok.remove();
    expect(await temps()).toBe(before);
  });

  it("a source of 350 templates syncs well within 30 s (issue 17)", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 350; i++) files[`templates/compose/app-${String(i).padStart(3, "0")}.yaml`] = template(`App number ${i}.`, `bench,n${i % 7}`);
    await repos.repo("big.git", files);
    const started = Date.now();
    const s = await create({ name: "Big catalog", repository_url: http.url("big.git"), folder_path: "templates/compose" });
    const d = await settled(s.uuid);
    const ms = Date.now() - started;
    console.log(`template source of 350 templates: synced in ${ms} ms`);
    expect(d).toMatchObject({ sync_status: "synced", template_count: 350 });
    expect(ms).toBeLessThan(30_000);
  }, 60_000);

  it("while git runs, the token is in no process's command line", async () => {
    const connections: net.Socket[] = [];
    const hang = net.createServer((c) => connections.push(c));
    await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
    try {
      const port = (hang.address() as net.AddressInfo).port;
      const s = await create({ name: "Argv check", repository_url: `http://127.0.0.1:${port}/argv.git`, auth_token: TOKEN });
      await expect.poll(() => connections.length, { timeout: 10_000 }).toBe(1);
      const cmdlines: string[] = [];
      for (const pid of (await readdir("/proc")).filter((n) => /^\d+$/.test(n))) {
        try {
          cmdlines.push((await readFile(`/proc/${pid}/cmdline`, "utf8")).split("\0").join(" "));
        } catch {
          /* gone meanwhile */
        }
      }
      // The clone is there (git and its http helper), and the token in none of them.
      expect(cmdlines.filter((c) => c.includes(`127.0.0.1:${port}/argv.git`)).length).toBeGreaterThan(0);
      expect(cmdlines.filter((c) => c.includes(TOKEN))).toEqual([]);
      for (const c of connections) c.destroy();
      expect(await settled(s.uuid)).toMatchObject({ sync_status: "failed" });
    } finally {
      for (const c of connections) c.destroy();
      hang.close();
    }
  });
});
