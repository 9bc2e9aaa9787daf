import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Socket } from "socket.io-client";
import { startTestInstance, type TestInstance } from "./harness.js";
import { connectFleet } from "./support/fake-agent.js";
import { Sessions, FAILURES_PER_EMAIL } from "../../control-plane/src/services/sessions.js";
import { hashPassword, needsRehash, verifyPassword } from "../../control-plane/src/crypto/password.js";

/**
 * Dashboard sign-in (issue 22): passwords, one-time links, the HTTP-only SameSite cookie, CSRF,
 * throttling, team switching, and the short-lived API tokens a session hands out (the API
 * itself keeps taking bearer tokens only: docs/decisions.md "Dashboard sessions").
 */
let t: TestInstance;
let sessions: Sessions;
let userId: number;
let email: string;
let teamA: number;
let teamB: number;
const PASSWORD = "correct horse battery staple";
const sockets: Socket[] = [];

interface Browser {
  cookie: string;
  csrf: string;
}

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${t.url}/session${path}`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify(body) });
}

function cookieFrom(res: Response): string {
  const set = res.headers.get("set-cookie") ?? "";
  const m = /capstan_session=([^;]*)/.exec(set);
  if (!m) throw new Error(`no session cookie in ${set}`);
  return `capstan_session=${m[1]}`;
}

async function signIn(): Promise<Browser> {
  const res = await post("/sign-in", { email, password: PASSWORD });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { csrf_token: string };
  return { cookie: cookieFrom(res), csrf: body.csrf_token };
}

const as = (b: Browser, extra: Record<string, string> = {}) => ({ Cookie: b.cookie, "X-CSRF-Token": b.csrf, ...extra });

beforeAll(async () => {
  t = await startTestInstance();
  sessions = new Sessions(t.instance.database.prisma);
  const a = await t.newTeam("Alpha");
  const b = await t.newTeam("Beta");
  teamA = a.teamId;
  teamB = b.teamId;
  email = `dash-${Date.now()}@example.test`;
  userId = await t.instance.admin.createUser("Dash", email);
  await t.instance.admin.setMember(teamA, userId, "admin");
  await t.instance.admin.setMember(teamB, userId, "viewer");
  await sessions.setPassword(userId, PASSWORD);
});
afterAll(async () => {
  for (const s of sockets) s.close();
  await t?.close();
});

describe("passwords", () => {
  it("are stored as scrypt hashes that verify only the right password", async () => {
    const row = await t.instance.database.prisma.userPassword.findUniqueOrThrow({ where: { userId } });
    expect(row.hash).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(row.hash).not.toContain(PASSWORD);
    expect(await verifyPassword(PASSWORD, row.hash)).toBe(true);
    expect(await verifyPassword(PASSWORD + "x", row.hash)).toBe(false);
    expect(await verifyPassword(PASSWORD, "plain")).toBe(false);
    expect(needsRehash(row.hash)).toBe(false);
    expect(needsRehash("scrypt$16384$8$1$AA==$AA==")).toBe(true);
    expect(await hashPassword(PASSWORD)).not.toBe(row.hash); // salted
  });

  it("shorter than 10 characters are refused", async () => {
    await expect(sessions.setPassword(userId, "short")).rejects.toThrow(/The given data was invalid/);
  });
});

describe("sign-in", () => {
  it("sets an HTTP-only, SameSite=Strict cookie and answers who is signed in, with a CSRF token", async () => {
    const res = await post("/sign-in", { email: email.toUpperCase(), password: PASSWORD });
    expect(res.status).toBe(200);
    const set = res.headers.get("set-cookie")!;
    expect(set).toMatch(/capstan_session=[A-Za-z0-9_-]{43}/);
    expect(set).toMatch(/HttpOnly/i);
    expect(set).toMatch(/SameSite=Strict/i);
    expect(set).toMatch(/Path=\//);
    const body = (await res.json()) as any;
    expect(body.user).toEqual({ id: userId, name: "Dash", email });
    expect(body.team).toEqual({ id: teamA, name: "Alpha", role: "admin" });
    expect(body.teams.map((x: any) => x.id)).toEqual([teamA, teamB]);
    expect(body.csrf_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const me = await fetch(`${t.url}/session`, { headers: { Cookie: cookieFrom(res) } });
    expect(me.status).toBe(200);
    expect(((await me.json()) as any).csrf_token).toBe(body.csrf_token);
  });

  it("a wrong password or unknown email: 401 with one message, no cookie", async () => {
    for (const body of [{ email, password: "wrong password!" }, { email: "nobody@example.test", password: PASSWORD }]) {
      const res = await post("/sign-in", body);
      expect(res.status).toBe(401);
      expect(res.headers.get("set-cookie")).toBeNull();
      expect(((await res.json()) as any).message).toBe("Wrong email or password.");
    }
  });

  it("bad input: 422 with field errors; a non-JSON body: 415", async () => {
    const res = await post("/sign-in", { email, password: PASSWORD, extra: 1 });
    expect(res.status).toBe(422);
    expect(((await res.json()) as any).errors.extra).toBeDefined();
    const form = await fetch(`${t.url}/session/sign-in`, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" }, body: `email=${email}&password=x` });
    expect(form.status).toBe(415);
  });

  it("without a cookie GET /session is 401", async () => {
    expect((await fetch(`${t.url}/session`)).status).toBe(401);
    expect((await fetch(`${t.url}/session`, { headers: { Cookie: "capstan_session=nonsense" } })).status).toBe(401);
  });

  it(`is throttled after ${FAILURES_PER_EMAIL} failures for one email: 429 with Retry-After, even with the right password`, async () => {
    const victim = `throttled-${Date.now()}@example.test`;
    const id = await t.instance.admin.createUser("Victim", victim);
    await t.instance.admin.setMember(teamA, id, "member");
    await sessions.setPassword(id, PASSWORD);
    for (let i = 0; i < FAILURES_PER_EMAIL; i++) expect((await post("/sign-in", { email: victim, password: "not the password" })).status).toBe(401);
    const res = await post("/sign-in", { email: victim, password: PASSWORD });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    // Another user signs in meanwhile (the email's count, not everyone's).
    await signIn();
  });
});

describe("CSRF and cross-site requests", () => {
  it("POSTs that change the session need the CSRF token: 403 without it or with a wrong one", async () => {
    const b = await signIn();
    const attempts: Record<string, string>[] = [{ Cookie: b.cookie }, { Cookie: b.cookie, "X-CSRF-Token": "x".repeat(43) }];
    for (const headers of attempts) {
      for (const path of ["/token", "/sign-out", "/team"]) {
        const res = await post(path, path === "/team" ? { team_id: teamB } : {}, headers);
        expect(res.status, path).toBe(403);
      }
    }
    expect((await fetch(`${t.url}/session`, { headers: { Cookie: b.cookie } })).status).toBe(200); // still signed in
  });

  it("a request from another site is refused (Origin or Sec-Fetch-Site), even with cookie and CSRF token", async () => {
    const b = await signIn();
    const foreign: Record<string, string>[] = [{ Origin: "https://evil.example" }, { "Sec-Fetch-Site": "cross-site" }, { "Sec-Fetch-Site": "same-site" }];
    for (const extra of foreign) {
      const res = await post("/token", {}, as(b, extra));
      expect(res.status).toBe(403);
      expect(((await res.json()) as any).message).toBe("Cross-site request refused.");
      expect((await post("/sign-in", { email, password: PASSWORD }, extra)).status).toBe(403);
    }
    expect((await post("/token", {}, as(b, { Origin: t.url, "Sec-Fetch-Site": "same-origin" }))).status).toBe(200);
  });

  it("the API never accepts the session cookie: only bearer tokens", async () => {
    const b = await signIn();
    const res = await fetch(`${t.url}/api/v1/servers`, { headers: as(b) });
    expect(res.status).toBe(401);
  });
});

describe("session tokens", () => {
  it("are short-lived user tokens of the session's team that work against the API and /fleet", async () => {
    const b = await signIn();
    const res = await post("/token", {}, as(b));
    expect(res.status).toBe(200);
    const body = (await res.json()) as { token: string; scopes: string[]; expires_at: string };
    expect(body.scopes).toEqual(["read", "write", "deploy"]);
    const ttl = Date.parse(body.expires_at) - Date.now();
    expect(ttl).toBeGreaterThan(10 * 60_000);
    expect(ttl).toBeLessThanOrEqual(15 * 60_000);
    const team = await t.api(body.token).get("/teams/current");
    expect(team.status).toBe(200);
    expect(team.body.id).toBe(teamA);
    const row = await t.instance.database.prisma.apiToken.findFirstOrThrow({ where: { userId }, orderBy: { id: "desc" } });
    expect(row).toMatchObject({ userId, teamId: teamA, name: "dashboard session" });
    sockets.push(await connectFleet(t.url, body.token));
  });

  it("switching team: the old team's tokens stop working, new ones belong to the new team with the role's scopes", async () => {
    const b = await signIn();
    const old = ((await (await post("/token", {}, as(b))).json()) as any).token as string;
    const sw = await post("/team", { team_id: teamB }, as(b));
    expect(sw.status).toBe(200);
    expect(((await sw.json()) as any).team).toEqual({ id: teamB, name: "Beta", role: "viewer" });
    expect((await t.api(old).get("/teams/current")).status).toBe(401);
    const fresh = (await (await post("/token", {}, as(b))).json()) as any;
    expect(fresh.scopes).toEqual(["read"]);
    expect((await t.api(fresh.token).get("/teams/current")).body.id).toBe(teamB);
    expect((await t.api(fresh.token).post("/projects", { name: "nope" })).status).toBe(403);
  });

  it("switching to a team the user is not in: 404, nothing changes", async () => {
    const b = await signIn();
    const other = await t.newTeam("Gamma");
    const res = await post("/team", { team_id: other.teamId }, as(b));
    expect(res.status).toBe(404);
    expect(((await (await fetch(`${t.url}/session`, { headers: { Cookie: b.cookie } })).json()) as any).team.id).toBe(teamA);
  });
});

describe("sign-out", () => {
  it("ends the session, clears the cookie and revokes the session's tokens", async () => {
    const b = await signIn();
    const token = ((await (await post("/token", {}, as(b))).json()) as any).token as string;
    const res = await post("/sign-out", {}, as(b));
    expect(res.status).toBe(204);
    expect(res.headers.get("set-cookie")).toMatch(/capstan_session=;/);
    expect((await fetch(`${t.url}/session`, { headers: { Cookie: b.cookie } })).status).toBe(401);
    expect((await post("/token", {}, as(b))).status).toBe(401);
    expect((await t.api(token).get("/teams/current")).status).toBe(401);
  });
});

describe("one-time sign-in links", () => {
  it("sign in once; a second use or a made-up link is 401", async () => {
    const link = await sessions.createSignInLink(userId);
    const first = await post("/link", { link });
    expect(first.status).toBe(200);
    expect(cookieFrom(first)).toMatch(/^capstan_session=/);
    expect(((await first.json()) as any).user.id).toBe(userId);
    expect((await post("/link", { link })).status).toBe(401);
    expect((await post("/link", { link: "A".repeat(43) })).status).toBe(401);
  });

  it("an expired link is 401", async () => {
    const link = await sessions.createSignInLink(userId);
    await t.instance.database.prisma.signInLink.updateMany({ where: { userId, usedAt: null }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect((await post("/link", { link })).status).toBe(401);
  });
});

describe("a user removed from the session's team", () => {
  it("falls back to another team of theirs, and is signed out when none is left", async () => {
    const u = `leaver-${Date.now()}@example.test`;
    const id = await t.instance.admin.createUser("Leaver", u);
    await t.instance.admin.setMember(teamA, id, "member");
    await t.instance.admin.setMember(teamB, id, "member");
    await sessions.setPassword(id, PASSWORD);
    const res = await post("/sign-in", { email: u, password: PASSWORD });
    const cookie = cookieFrom(res);
    await t.instance.admin.removeMember(teamA, id);
    expect(((await (await fetch(`${t.url}/session`, { headers: { Cookie: cookie } })).json()) as any).team.id).toBe(teamB);
    await t.instance.admin.removeMember(teamB, id);
    expect((await fetch(`${t.url}/session`, { headers: { Cookie: cookie } })).status).toBe(401);
  });
});

describe("API tokens page (/session/api-tokens)", () => {
  const del = (b: Browser, id: number | string) => fetch(`${t.url}/session/api-tokens/${id}`, { method: "DELETE", headers: as(b) });
  const list = async (b: Browser) => ((await (await fetch(`${t.url}/session/api-tokens`, { headers: { Cookie: b.cookie } })).json()) as { data: any[] }).data;

  it("creates a user token with exactly the chosen scopes, shown once; it works against the API; revoked it is 401", async () => {
    const b = await signIn();
    const res = await post("/api-tokens", { name: "ci reader", scopes: ["read"] }, as(b));
    expect(res.status).toBe(201);
    const created = (await res.json()) as { token: string; data: any };
    expect(created.token).toMatch(/^cap_[0-9A-Za-z]{40}$/);
    expect(created.data).toMatchObject({ name: "ci reader", scopes: ["read"], last_used_at: null });
    const api = t.api(created.token);
    expect((await api.get("/teams/current")).body.id).toBe(teamA);
    expect((await api.post("/projects", { name: "nope" })).status).toBe(403);
    const listed = await list(b);
    expect(listed.map((x) => x.id)).toContain(created.data.id);
    expect(JSON.stringify(listed)).not.toContain(created.token);
    // The dashboard's own session tokens are not in the list.
    expect(listed.every((x) => x.name !== "dashboard session")).toBe(true);
    expect((await del(b, created.data.id)).status).toBe(200);
    expect((await api.get("/teams/current")).status).toBe(401);
    expect((await list(b)).map((x) => x.id)).not.toContain(created.data.id);
    expect((await del(b, created.data.id)).status).toBe(404);
  });

  it("needs the CSRF token to create or revoke; refuses scopes the role cannot give and bad input", async () => {
    const b = await signIn();
    expect((await post("/api-tokens", { name: "x", scopes: ["read"] }, { Cookie: b.cookie })).status).toBe(403);
    const made = (await (await post("/api-tokens", { name: "keep", scopes: ["read", "write"] }, as(b))).json()) as any;
    expect((await fetch(`${t.url}/session/api-tokens/${made.data.id}`, { method: "DELETE", headers: { Cookie: b.cookie } })).status).toBe(403);
    expect((await t.api(made.token).get("/teams/current")).status).toBe(200);
    for (const body of [{ name: "", scopes: ["read"] }, { name: "x", scopes: [] }, { name: "x", scopes: ["admin"] }, { name: "dashboard session", scopes: ["read"] }]) {
      const r = await post("/api-tokens", body, as(b));
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    expect((await del(b, "abc")).status).toBe(422);
    // As a viewer (team Beta) only read can be given.
    await post("/team", { team_id: teamB }, as(b));
    const r = await post("/api-tokens", { name: "w", scopes: ["read", "write"] }, as(b));
    expect(r.status).toBe(422);
    expect(((await r.json()) as any).errors.scopes[0]).toMatch(/viewer/);
  });

  it("another user's token, or a token of another team, cannot be revoked here (404)", async () => {
    const b = await signIn();
    const other = await t.newMember(teamA, "member");
    const otherId = (await t.instance.database.prisma.apiToken.findFirstOrThrow({ where: { userId: other.userId } })).id;
    expect((await del(b, otherId)).status).toBe(404);
    expect((await t.api(other.token).get("/teams/current")).status).toBe(200);
  });
});
