import { generateKeyPairSync } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { startFakeGitHub, type FakeGitHub } from "./support/fake-github.js";
import { appWorld, ok, placement } from "./support/applications.js";
import { errorResponse } from "../../control-plane/src/http/errors.js";

/** How a service's failure reaches a client: its status (through the one error mapping) and message. */
async function failure(p: Promise<unknown>): Promise<{ status: number | undefined; message: string }> {
  const err = await p.then(
    () => {
      throw new Error("expected a failure");
    },
    (e: unknown) => e as Error,
  );
  return { status: errorResponse(err)?.status, message: err.message };
}

let t: TestInstance;
let gh: FakeGitHub;
let team: TeamFixture;
const keys = new KeyFactory();

const rsa = (bits = 2048, type: "pkcs1" | "pkcs8" = "pkcs1") =>
  generateKeyPairSync("rsa", { modulusLength: bits, privateKeyEncoding: { type, format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } }).privateKey;
const APP_KEY = rsa();
const OTHER_KEY = rsa();
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** A line from the middle of a PEM body: private key material. */
const keyLine = (pem: string) => pem.split("\n")[5]!;
/** GitHub's ids are 64-bit integers: ids past int4 must be stored and sent as they are. */
const BIG_APP_ID = 2 ** 31;
const BIG_INSTALLATION_ID = Number.MAX_SAFE_INTEGER;

beforeAll(async () => {
  // The fake GitHub listens on loopback, which a default instance refuses to call (lib/outbound.ts).
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
  gh = await startFakeGitHub();
  gh.addApp(4242, APP_KEY, [777]);
  gh.addApp(BIG_APP_ID, APP_KEY, [BIG_INSTALLATION_ID]);
  team = await t.newTeam();
});
afterAll(async () => {
  await gh?.close();
  await t?.close();
  keys.cleanup();
});

const body = (extra: Record<string, unknown> = {}) => ({
  name: "acme bot",
  app_id: 4242,
  installation_id: 777,
  private_key: APP_KEY,
  api_url: gh.url,
  html_url: "https://github.example.com/",
  webhook_secret: "whsec-very-secret",
  ...extra,
});

const gitAppId = async (uuid: string) => (await t.instance.database.prisma.gitApp.findUniqueOrThrow({ where: { uuid } })).id;

describe("/github-apps", () => {
  it("creates, lists and reads git apps without ever returning the key or the secret", async () => {
    const res = await team.api.post("/github-apps", body());
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toEqual({
      uuid: expect.any(String),
      name: "acme bot",
      app_id: 4242,
      installation_id: 777,
      api_url: gh.url,
      html_url: "https://github.example.com",
      has_webhook_secret: true,
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
    });
    const defaults = await team.api.post("/github-apps", { name: "gh", app_id: 1, installation_id: 2, private_key: APP_KEY });
    expect(defaults.body).toMatchObject({ api_url: "https://api.github.com", html_url: "https://github.com", has_webhook_secret: false });

    const list = await team.api.get("/github-apps");
    const got = await team.api.get(`/github-apps/${res.body.uuid}`);
    expect(got.body).toEqual(res.body);
    expect(list.body.data.map((g: any) => g.uuid)).toEqual([res.body.uuid, defaults.body.uuid]);
    expect((await team.api.get("/github-apps", { per_page: 1 })).body.meta).toEqual({ current_page: 1, per_page: 1, total: 2, last_page: 2 });
    for (const r of [res, defaults, list, got]) {
      const text = JSON.stringify(r.body);
      expect(text).not.toContain(keyLine(APP_KEY));
      expect(text).not.toContain("PRIVATE KEY");
      expect(text).not.toContain("whsec-very-secret");
    }
    // sealed at rest
    const row = await t.instance.database.prisma.gitApp.findUniqueOrThrow({ where: { uuid: res.body.uuid } });
    expect(row.privateKey).toMatch(/^v1:/);
    expect(row.privateKey).not.toContain(keyLine(APP_KEY));
    expect(row.webhookSecret).toMatch(/^v1:/);
    expect(await t.instance.services.gitApps.webhookSecret(row.id)).toBe("whsec-very-secret");
  });

  it("accepts PKCS#8 keys; refuses non-RSA, short, encrypted and broken keys and bad URLs (422, nothing stored)", async () => {
    expect((await team.api.post("/github-apps", body({ private_key: rsa(2048, "pkcs8") }))).status).toBe(201);
    const before = await t.instance.database.prisma.gitApp.count();
    const ed = generateKeyPairSync("ed25519", { privateKeyEncoding: { type: "pkcs8", format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } }).privateKey;
    const encrypted = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      privateKeyEncoding: { type: "pkcs8", format: "pem", cipher: "aes-256-cbc", passphrase: "pw" },
      publicKeyEncoding: { type: "spki", format: "pem" },
    }).privateKey;
    const ssh = (await keys.generate("rsa")).privateKey;
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ private_key: ed }, "private_key", /RSA/],
      [{ private_key: rsa(1024) }, "private_key", /2048/],
      [{ private_key: encrypted }, "private_key", /passphrase/],
      [{ private_key: "-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----" }, "private_key", /PEM/],
      [{ private_key: ssh }, "private_key", /./],
      [{ api_url: "file:///etc/passwd" }, "api_url", /http/],
      [{ api_url: "https://user:pw@api.github.com" }, "api_url", /credentials/],
      [{ html_url: "https://github.com/?x=1" }, "html_url", /query/],
      [{ html_url: "javascript:alert(1)" }, "html_url", /http/],
      [{ app_id: 0 }, "app_id", /./],
      [{ app_id: "4242" }, "app_id", /./],
      [{ installation_id: 1.5 }, "installation_id", /./],
      [{ name: "" }, "name", /./],
    ];
    for (const [patch, field, message] of cases) {
      const res = await team.api.post("/github-apps", body(patch));
      expect(res.status, `${field} ${JSON.stringify(res.body)}`).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual([field]);
      expect(res.body.errors[field].join(" ")).toMatch(message);
    }
    expect(await t.instance.database.prisma.gitApp.count()).toBe(before);
  });

  it("only owners and admins change git apps; members read them", async () => {
    const created = await ok(team.api.post("/github-apps", body({ name: "guarded" })), "git app");
    const member = await t.newMember(team.teamId, "member");
    const api = t.api(member.token);
    expect((await api.get(`/github-apps/${created.uuid}`)).status).toBe(200);
    expect((await api.post("/github-apps", body())).status).toBe(403);
    expect((await api.patch(`/github-apps/${created.uuid}`, { name: "mine" })).status).toBe(403);
    expect((await api.delete(`/github-apps/${created.uuid}`)).status).toBe(403);
    const admin = await t.newMember(team.teamId, "admin");
    expect((await t.api(admin.token).patch(`/github-apps/${created.uuid}`, { name: "renamed" })).body.data.name).toBe("renamed");
    const readOnly = await t.newMember(team.teamId, "owner", ["read"]);
    expect((await t.api(readOnly.token).post("/github-apps", body())).status).toBe(403);
  });

  it("PATCH changes only what is given; null removes the webhook secret; empty is 422", async () => {
    const created = await ok(team.api.post("/github-apps", body({ name: "patchme" })), "git app");
    const res = await team.api.patch(`/github-apps/${created.uuid}`, { installation_id: 778, webhook_secret: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: "Git app updated.", data: { ...created, installation_id: 778, has_webhook_secret: false, updated_at: expect.stringMatching(ISO) } });
    expect((await team.api.patch(`/github-apps/${created.uuid}`, {})).status).toBe(422);
    expect((await team.api.patch(`/github-apps/${created.uuid}`, { private_key: "nope" })).status).toBe(422);
  });

  it("another team's git app is 404 everywhere, including in an application create body", async () => {
    const created = await ok(team.api.post("/github-apps", body({ name: "private" })), "git app");
    const other = await appWorld(t, keys);
    expect((await other.api.get(`/github-apps/${created.uuid}`)).status).toBe(404);
    expect((await other.api.patch(`/github-apps/${created.uuid}`, { name: "x" })).status).toBe(404);
    expect((await other.api.delete(`/github-apps/${created.uuid}`)).status).toBe(404);
    expect((await other.api.get("/github-apps")).body.data).toEqual([]);
    const res = await other.api.post("/applications/private-git-app", {
      ...placement(other),
      git_app_uuid: created.uuid,
      git_repository: "acme/api",
      git_branch: "main",
      build_pack: "builder_a",
    });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: "Git app not found." });
    expect((await other.api.get("/applications")).body.data).toEqual([]);
  });
});

describe("POST /applications/private-git-app", () => {
  it("stores the clone URL on the app's host; the git app cannot be deleted while used", async () => {
    const w = await appWorld(t, keys);
    const gitApp = await ok(w.api.post("/github-apps", body()), "git app");
    const res = await w.api.post("/applications/private-git-app", {
      ...placement(w),
      git_app_uuid: gitApp.uuid,
      git_repository: "acme/private-api",
      git_branch: "main",
      build_pack: "builder_a",
      fqdn: "api.example.com",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toEqual({ uuid: expect.any(String), name: "private-api", fqdn: "https://api.example.com" });
    const got = (await w.api.get(`/applications/${res.body.uuid}`)).body;
    expect(got).toMatchObject({ source: "private_git_app", git_app_uuid: gitApp.uuid, git_repository: "https://github.example.com/acme/private-api.git", build_pack: "builder_a" });

    for (const git_repository of ["https://github.com/acme/api", "acme", "acme/api/extra", "../api", "acme/-x", "acme/$(id)", "acme/a b"]) {
      const bad = await w.api.post("/applications/private-git-app", { ...placement(w), git_app_uuid: gitApp.uuid, git_repository, git_branch: "main", build_pack: "builder_a" });
      expect(bad.status, git_repository).toBe(422);
      expect(Object.keys(bad.body.errors)).toEqual(["git_repository"]);
    }
    // PATCH takes owner/name again
    const patched = await w.api.patch(`/applications/${res.body.uuid}`, { git_repository: "acme/other.git" });
    expect(patched.body.data.git_repository).toBe("https://github.example.com/acme/other.git");

    const refused = await w.api.delete(`/github-apps/${gitApp.uuid}`);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/used by 1 application/);
    expect((await w.api.delete(`/applications/${res.body.uuid}`)).status).toBe(200);
    expect((await w.api.delete(`/github-apps/${gitApp.uuid}`)).status).toBe(200);
    expect((await w.api.get(`/github-apps/${gitApp.uuid}`)).status).toBe(404);
  });
});

describe("installation tokens, as GitHub specifies them", () => {
  it("signs an RS256 JWT, sends GitHub's headers, and returns the token", async () => {
    const created = await ok(team.api.post("/github-apps", body({ name: "tokens" })), "git app");
    const id = await gitAppId(created.uuid);
    const calls = gh.calls.length;
    const started = Math.floor(Date.now() / 1000);
    const token = await t.instance.services.gitApps.installationToken(id);
    expect(token.token).toMatch(/^ghs_[0-9a-f]{36}$/);
    expect(token.token).toBe(gh.issued.at(-1)!.token);
    expect(token.expiresAt.getTime()).toBe(new Date(gh.issued.at(-1)!.expiresAt).getTime());
    const call = gh.calls[calls]!;
    expect(call).toMatchObject({ method: "POST", path: "/app/installations/777/access_tokens" });
    expect(call.headers).toMatchObject({ accept: "application/vnd.github+json", "x-github-api-version": "2022-11-28" });
    expect(call.jwt!.iss).toBe(4242);
    expect(call.jwt!.iat).toBeLessThanOrEqual(started - 59);
    expect(call.jwt!.exp - call.jwt!.iat).toBe(600);
  });

  it("never calls a loopback, link-local or metadata API unless the instance allows private endpoints", async () => {
    const strict = await startTestInstance();
    try {
      const owner = await strict.newTeam();
      const calls = gh.calls.length;
      for (const apiUrl of [gh.url, "http://169.254.169.254/latest", "http://localhost:65001"]) {
        const created = await ok(owner.api.post("/github-apps", body({ name: `strict ${apiUrl}`, api_url: apiUrl })), "git app");
        const id = (await strict.instance.database.prisma.gitApp.findUniqueOrThrow({ where: { uuid: created.uuid } })).id;
        await expect(strict.instance.services.gitApps.installationToken(id)).rejects.toThrow(/loopback, link-local or metadata/);
      }
      expect(gh.calls.length).toBe(calls);
    } finally {
      await strict.close();
    }
  });

  it("caches a token until 5 minutes before it expires; a changed app gets a new one", async () => {
    const created = await ok(team.api.post("/github-apps", body({ name: "cached" })), "git app");
    const id = await gitAppId(created.uuid);
    const svc = t.instance.services.gitApps;
    const first = await svc.installationToken(id);
    const calls = gh.calls.length;
    const [a, b] = await Promise.all([svc.installationToken(id), svc.installationToken(id)]);
    expect(a.token).toBe(first.token);
    expect(b.token).toBe(first.token);
    expect(gh.calls.length).toBe(calls);

    await ok(team.api.patch(`/github-apps/${created.uuid}`, { name: "cached-2" }), "patch");
    const fresh = await svc.installationToken(id);
    expect(fresh.token).not.toBe(first.token);

    // Tokens that expire within the margin are never reused; concurrent asks share one request.
    gh.tokenTtlMs = 4 * 60_000;
    try {
      const short = await ok(team.api.post("/github-apps", body({ name: "short" })), "git app");
      const shortId = await gitAppId(short.uuid);
      const x = await svc.installationToken(shortId);
      const before = gh.calls.length;
      const [y, z] = await Promise.all([svc.installationToken(shortId), svc.installationToken(shortId)]);
      expect(y.token).not.toBe(x.token);
      expect(z.token).toBe(y.token);
      expect(gh.calls.length).toBe(before + 1);
    } finally {
      gh.tokenTtlMs = 3600_000;
    }
  });

  it("ids past 32 bits (GitHub's are 64-bit) are stored, returned and used as they are", async () => {
    const created = await ok(team.api.post("/github-apps", body({ name: "big ids", app_id: BIG_APP_ID, installation_id: BIG_INSTALLATION_ID })), "git app");
    expect(created).toMatchObject({ app_id: BIG_APP_ID, installation_id: BIG_INSTALLATION_ID });
    expect((await team.api.get(`/github-apps/${created.uuid}`)).body).toEqual(created);
    const calls = gh.calls.length;
    await t.instance.services.gitApps.installationToken(await gitAppId(created.uuid));
    expect(gh.calls[calls]).toMatchObject({ path: `/app/installations/${BIG_INSTALLATION_ID}/access_tokens` });
    expect(gh.calls[calls]!.jwt!.iss).toBe(BIG_APP_ID);
    const patched = await team.api.patch(`/github-apps/${created.uuid}`, { installation_id: BIG_INSTALLATION_ID - 1 });
    expect(patched.body.data).toMatchObject({ installation_id: BIG_INSTALLATION_ID - 1 });
    expect((await team.api.post("/github-apps", body({ installation_id: BIG_INSTALLATION_ID + 1 }))).status).toBe(422);
  });

  it("fails with a clear reason: wrong key, wrong installation, unreachable API", async () => {
    const svc = t.instance.services.gitApps;
    const wrongKey = await ok(team.api.post("/github-apps", body({ name: "wrong key", private_key: OTHER_KEY })), "git app");
    expect(await failure(svc.installationToken(await gitAppId(wrongKey.uuid)))).toMatchObject({
      status: 502,
      message: expect.stringMatching(/^Git app wrong key: could not get an installation token: the API answered 401: .+\(check app_id and the private key\)$/),
    });
    const wrongInstallation = await ok(team.api.post("/github-apps", body({ name: "wrong inst", installation_id: 999 })), "git app");
    expect(await failure(svc.installationToken(await gitAppId(wrongInstallation.uuid)))).toMatchObject({
      status: 502,
      message: expect.stringMatching(/answered 404: Not Found \(check installation_id/),
    });
    const unreachable = await ok(team.api.post("/github-apps", body({ name: "gone", api_url: "http://127.0.0.1:9" })), "git app");
    expect(await failure(svc.installationToken(await gitAppId(unreachable.uuid)))).toMatchObject({
      status: 502,
      message: expect.stringMatching(/http:\/\/127\.0\.0\.1:9 is not reachable/),
    });
    // The token request never carries the private key.
    for (const c of gh.calls) expect(JSON.stringify(c)).not.toContain(keyLine(APP_KEY));
  });
});
