import { createServer, type Server } from "node:http";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createInstance, type Instance } from "../../control-plane/src/instance.js";
import { client, startTestInstance, type ApiResponse, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";

let t: TestInstance;
beforeAll(async () => {
  t = await startTestInstance();
});
afterAll(async () => {
  await t?.close();
});

const UNAUTHENTICATED = { message: "Unauthenticated." };
const NO_ABILITY = { message: "Invalid ability provided." };

/** A token created through the admin service (what `capstan token create` does), with its id. */
async function adminToken(teamId: number, opts: { userId?: number; expiresAt?: Date; scopes?: ("read" | "write" | "deploy")[] } = {}) {
  const name = `core-${Math.random().toString(36).slice(2)}`;
  const token = await t.instance.admin.createToken({
    teamId,
    name,
    scopes: opts.scopes ?? ["read", "write", "deploy"],
    userId: opts.userId,
    expiresAt: opts.expiresAt,
  });
  const row = (await t.instance.admin.listTokens(teamId)).find((r) => r.name === name)!;
  return { token, id: row.id };
}

function expectRateLimitHeaders(res: ApiResponse, limit: number) {
  const h = res.headers;
  expect(h.get("x-ratelimit-limit")).toBe(String(limit));
  const remaining = Number(h.get("x-ratelimit-remaining"));
  expect(Number.isInteger(remaining)).toBe(true);
  expect(remaining).toBeGreaterThanOrEqual(0);
  expect(remaining).toBeLessThan(limit);
  const reset = Number(h.get("x-ratelimit-reset"));
  const now = Date.now() / 1000;
  expect(Number.isInteger(reset)).toBe(true);
  expect(reset).toBeGreaterThanOrEqual(Math.floor(now));
  expect(reset).toBeLessThanOrEqual(Math.ceil(now) + 60);
}

describe("authentication (401 Unauthenticated.)", () => {
  it("rejects a request without Authorization header", async () => {
    const res = await t.api().get("/projects");
    expect(res.status).toBe(401);
    expect(res.body).toEqual(UNAUTHENTICATED);
  });

  it.each([
    ["empty bearer", "Bearer "],
    ["wrong scheme", `Basic ${Buffer.from("root:root").toString("base64")}`],
    ["not a token", "Bearer not-a-token"],
    ["token with a bad character", "Bearer cap_" + "A".repeat(39) + "!"],
    ["token too short", "Bearer cap_abc"],
    ["two tokens", "Bearer cap_" + "a".repeat(40) + " cap_" + "b".repeat(40)],
    ["bare token without scheme", "cap_" + "a".repeat(40)],
  ])("rejects a malformed header: %s", async (_name, header) => {
    const res = await t.api().raw("/projects", { method: "GET", headers: { Authorization: header } });
    expect(res.status).toBe(401);
    expect(res.body).toEqual(UNAUTHENTICATED);
  });

  it("rejects a well-formed token that does not exist", async () => {
    const res = await t.api("cap_" + "Z".repeat(40)).get("/projects");
    expect(res.status).toBe(401);
    expect(res.body).toEqual(UNAUTHENTICATED);
  });

  it("accepts the scheme case-insensitively (sanity check for the cases above)", async () => {
    const res = await t.api().raw("/teams/current", { method: "GET", headers: { Authorization: `bearer ${t.rootToken}` } });
    expect(res.status).toBe(200);
  });

  it("rejects a token once it is revoked", async () => {
    const team = await t.newTeam();
    const { token, id } = await adminToken(team.teamId);
    expect((await t.api(token).get("/teams/current")).status).toBe(200);
    await t.instance.admin.revokeToken(id);
    const res = await t.api(token).get("/teams/current");
    expect(res.status).toBe(401);
    expect(res.body).toEqual(UNAUTHENTICATED);
  });

  it("rejects an expired token and accepts one that expires later", async () => {
    const team = await t.newTeam();
    const expired = await adminToken(team.teamId, { expiresAt: new Date(Date.now() - 1000) });
    const later = await adminToken(team.teamId, { expiresAt: new Date(Date.now() + 3_600_000) });
    const res = await t.api(expired.token).get("/teams/current");
    expect(res.status).toBe(401);
    expect(res.body).toEqual(UNAUTHENTICATED);
    expect((await t.api(later.token).get("/teams/current")).status).toBe(200);
  });

  it("rejects the token of a user removed from the team (AdminService.removeMember)", async () => {
    const team = await t.newTeam();
    const m = await t.newMember(team.teamId, "admin");
    expect((await t.api(m.token).get("/teams/current")).status).toBe(200);
    await t.instance.admin.removeMember(team.teamId, m.userId);
    const res = await t.api(m.token).get("/teams/current");
    expect(res.status).toBe(401);
    expect(res.body).toEqual(UNAUTHENTICATED);
  });

  it("rejects the token of a user whose membership vanished without the token being revoked", async () => {
    const team = await t.newTeam();
    const m = await t.newMember(team.teamId, "admin");
    expect((await t.api(m.token).get("/teams/current")).status).toBe(200);
    await t.instance.database.prisma.membership.deleteMany({ where: { teamId: team.teamId, userId: m.userId } });
    const res = await t.api(m.token).get("/teams/current");
    expect(res.status).toBe(401);
    expect(res.body).toEqual(UNAUTHENTICATED);
  });

  it("answers 401 before anything else: no token on a write with a malformed body", async () => {
    const res = await t.api().raw("/projects", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{oops" });
    expect(res.status).toBe(401);
    expect(res.body).toEqual(UNAUTHENTICATED);
  });
});

describe("scopes (403 Invalid ability provided.)", () => {
  it("refuses writes to a read-only token and lets it read", async () => {
    const team = await t.newTeam();
    const { token } = await adminToken(team.teamId, { scopes: ["read"] });
    const before = await team.api.get("/projects");
    const res = await t.api(token).post("/projects", { name: "nope" });
    expect(res.status).toBe(403);
    expect(res.body).toEqual(NO_ABILITY);
    expect((await t.api(token).get("/projects")).status).toBe(200);
    expect((await team.api.get("/projects")).body).toEqual(before.body);
  });

  it("refuses reads to a write-only token and lets it write", async () => {
    const team = await t.newTeam();
    const { token } = await adminToken(team.teamId, { scopes: ["write"] });
    const res = await t.api(token).get("/projects");
    expect(res.status).toBe(403);
    expect(res.body).toEqual(NO_ABILITY);
    expect((await t.api(token).post("/projects", { name: "write-only" })).status).toBe(201);
  });

  it("refuses reads and writes to a deploy-only token", async () => {
    const team = await t.newTeam();
    const { token } = await adminToken(team.teamId, { scopes: ["deploy"] });
    for (const res of [await t.api(token).get("/teams/current"), await t.api(token).post("/projects", { name: "x" })]) {
      expect(res.status).toBe(403);
      expect(res.body).toEqual(NO_ABILITY);
    }
  });

  it("checks the scope before validating the body", async () => {
    const team = await t.newTeam();
    const { token } = await adminToken(team.teamId, { scopes: ["read"] });
    const res = await t.api(token).post("/projects", { name: "" });
    expect(res.status).toBe(403);
    expect(res.body).toEqual(NO_ABILITY);
  });
});

describe("request bodies", () => {
  it("answers 400 with a clear message for malformed JSON", async () => {
    const res = await t.api(t.rootToken).raw("/projects", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: '{"name": "x",',
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: "Malformed JSON in request body." });
  });

  it("answers 400 for a JSON scalar body (strict JSON: objects and arrays only)", async () => {
    const res = await t.api(t.rootToken).raw("/projects", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: '"just a string"',
    });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/JSON/);
  });

  it("answers 422 for a JSON array where an object is expected", async () => {
    const res = await t.api(t.rootToken).raw("/projects", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: "[1,2]",
    });
    expect(res.status).toBe(422);
    expect(res.body.message).toEqual(expect.any(String));
    expect(Object.keys(res.body.errors).length).toBeGreaterThan(0);
  });

  it.each([
    ["text/plain", "name=x"],
    ["application/x-www-form-urlencoded", "name=x"],
    ["multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nx\r\n--b--\r\n"],
  ])("answers 415 for a %s body and creates nothing", async (type, body) => {
    const team = await t.newTeam();
    const res = await team.api.raw("/projects", { method: "POST", headers: { "Content-Type": type }, body });
    expect(res.status).toBe(415);
    expect(res.body.message).toMatch(/application\/json/);
    expect((await team.api.get("/projects")).body.data).toEqual([]);
  });

  it("answers 415 for a body without any content type", async () => {
    const res = await t.api(t.rootToken).raw("/projects", { method: "POST", body: new Blob(['{"name":"x"}']) });
    expect(res.status).toBe(415);
  });

  it("accepts application/json with a charset", async () => {
    const res = await t.api(t.rootToken).raw("/projects", {
      method: "POST",
      headers: { "Content-Type": "application/json; charset=utf-8" },
      body: JSON.stringify({ name: "charset" }),
    });
    expect(res.status).toBe(201);
    expect(res.body.name).toBe("charset");
  });

  it("parses an application/*+json body it accepts instead of ignoring it", async () => {
    const team = await t.newTeam();
    const created = await team.api.post("/projects", { name: "before" });
    const res = await team.api.raw(`/projects/${created.body.uuid}`, {
      method: "PATCH",
      headers: { "Content-Type": "application/merge-patch+json" },
      body: JSON.stringify({ name: "after" }),
    });
    expect(res.status).toBe(200);
    expect(res.body.data.name).toBe("after");
  });
});

describe("body size limit (PLATFORM_MAX_BODY_BYTES)", () => {
  let small: TestInstance;
  beforeAll(async () => {
    small = await startTestInstance({ PLATFORM_MAX_BODY_BYTES: "2048" });
  });
  afterAll(async () => {
    await small?.close();
  });

  it("answers 413 above the limit and creates nothing", async () => {
    const api = small.api(small.rootToken);
    const res = await api.post("/projects", { name: "big", description: "x".repeat(3000) });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ message: "Request body too large: the limit is 2048 bytes." });
    expect((await api.get("/projects")).body.data).toEqual([]);
  });

  it("accepts a body just under the limit", async () => {
    const api = small.api(small.rootToken);
    const res = await api.post("/projects", { name: "fits", description: "x".repeat(1500) });
    expect(res.status).toBe(201);
  });
});

describe("unknown routes", () => {
  it("answers 404 JSON for an unknown path under /api/v1", async () => {
    const res = await t.api(t.rootToken).get("/no-such-thing");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.body).toEqual({ message: "Not found." });
  });

  it("answers 404 JSON for a known path with an unsupported method", async () => {
    const res = await t.api(t.rootToken).put("/projects", { name: "x" });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: "Not found." });
  });

  // "/" is the dashboard since issue 22 (test/api/dashboard-page.test.ts); other paths stay 404.
  it("answers 404 JSON outside /api/v1", async () => {
    for (const path of ["/nope", "/api/v2/projects", "/assets/nope.js", "/session/nope"]) {
      const res = await client(t.url).get(path);
      expect(res.status, path).toBe(404);
      expect(res.headers.get("content-type"), path).toMatch(/^application\/json/);
      expect(res.body, path).toEqual({ message: "Not found." });
    }
  });
});

describe("health probes", () => {
  it("answers /healthz with 200 JSON, without a token", async () => {
    const res = await client(t.url).get("/healthz");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.body).toEqual({ status: "ok" });
  });

  it("answers /readyz with 200 JSON when the database answers", async () => {
    const res = await client(t.url).get("/readyz");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.body).toEqual({ status: "ready" });
  });
});

describe("response headers", () => {
  it("sends rate-limit headers and a request id on API responses of every kind", async () => {
    const api = t.api(t.rootToken);
    const responses: [string, ApiResponse][] = [
      ["200", await api.get("/teams/current")],
      ["201", await api.post("/projects", { name: "headers" })],
      ["401", await t.api().get("/projects")],
      ["404", await api.get("/projects/does-not-exist")],
      ["422", await api.post("/projects", {})],
      ["400", await api.raw("/projects", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{" })],
      ["415", await api.raw("/projects", { method: "POST", headers: { "Content-Type": "text/plain" }, body: "x" })],
    ];
    for (const [status, res] of responses) {
      expect(String(res.status), status).toBe(status);
      expectRateLimitHeaders(res, 1_000_000);
      expect(res.headers.get("x-request-id"), status).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it("counts X-RateLimit-Remaining down per request", async () => {
    const team = await t.newTeam();
    const a = Number((await team.api.get("/teams/current")).headers.get("x-ratelimit-remaining"));
    const b = Number((await team.api.get("/teams/current")).headers.get("x-ratelimit-remaining"));
    expect(b).toBe(a - 1);
  });

  it("gives each request its own id", async () => {
    const api = t.api(t.rootToken);
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++) ids.add((await api.get("/teams/current")).headers.get("x-request-id")!);
    expect(ids.size).toBe(3);
  });

  it("echoes a valid incoming X-Request-Id, also outside /api/v1", async () => {
    const id = "trace-123_abc.DEF";
    const res = await t.api(t.rootToken).raw("/teams/current", { method: "GET", headers: { "X-Request-Id": id } });
    expect(res.headers.get("x-request-id")).toBe(id);
    const health = await client(t.url).raw("/healthz", { method: "GET", headers: { "X-Request-Id": id } });
    expect(health.headers.get("x-request-id")).toBe(id);
  });

  it.each([
    ["spaces", "has spaces in it"],
    ["too long", "a".repeat(129)],
    ["header injection attempt", "abc<script>"],
  ])("replaces an invalid incoming X-Request-Id (%s) with a generated one", async (_n, id) => {
    const res = await t.api(t.rootToken).raw("/teams/current", { method: "GET", headers: { "X-Request-Id": id } });
    expect(res.headers.get("x-request-id")).not.toBe(id);
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("rate limit (PLATFORM_RATE_LIMIT_PER_MINUTE=5)", () => {
  let limited: TestInstance;
  beforeAll(async () => {
    limited = await startTestInstance({ PLATFORM_RATE_LIMIT_PER_MINUTE: "5" });
  });
  afterAll(async () => {
    await limited?.close();
  });

  it("answers 429 on the 6th request of a token, with Retry-After and the headers, per token", async () => {
    const a = await limited.newTeam();
    const b = await limited.newTeam();
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await a.api.get("/teams/current");
      expect(res.status, `request ${i + 1}`).toBe(200);
      expectRateLimitHeaders(res, 5);
      remaining.push(Number(res.headers.get("x-ratelimit-remaining")));
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);

    const sixth = await a.api.get("/teams/current");
    expect(sixth.status).toBe(429);
    expect(sixth.body).toEqual({ message: expect.stringMatching(/too many requests/i) });
    expect(sixth.headers.get("x-ratelimit-limit")).toBe("5");
    expect(sixth.headers.get("x-ratelimit-remaining")).toBe("0");
    const reset = Number(sixth.headers.get("x-ratelimit-reset"));
    expect(reset).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000));
    expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60);
    const retryAfter = Number(sixth.headers.get("retry-after"));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(sixth.headers.get("x-request-id")).toBeTruthy();

    // Writes are refused too, and nothing is created.
    const write = await a.api.post("/projects", { name: "throttled" });
    expect(write.status).toBe(429);
    expect(await limited.instance.database.prisma.project.count({ where: { teamId: a.teamId } })).toBe(0);

    // Another token (another team) is counted on its own.
    const other = await b.api.get("/teams/current");
    expect(other.status).toBe(200);
    expect(other.headers.get("x-ratelimit-remaining")).toBe("4");
  });

  it("counts two tokens of the same team separately", async () => {
    const team = await limited.newTeam();
    const second = await limited.newMember(team.teamId, "admin");
    for (let i = 0; i < 5; i++) expect((await team.api.get("/teams/current")).status).toBe(200);
    expect((await team.api.get("/teams/current")).status).toBe(429);
    expect((await limited.api(second.token).get("/teams/current")).status).toBe(200);
  });
});

describe("validation errors (422)", () => {
  it("answers {message, errors:{field:[...]}} and changes nothing", async () => {
    const team = await t.newTeam();
    await team.api.post("/projects", { name: "existing" });
    const before = await team.api.get("/projects");

    const cases: [unknown, string][] = [
      [{}, "name"],
      [{ name: "" }, "name"],
      [{ name: "   " }, "name"],
      [{ name: 42 }, "name"],
      [{ name: "ok", description: 7 }, "description"],
      [{ name: "x".repeat(256) }, "name"],
    ];
    for (const [body, field] of cases) {
      const res = await team.api.post("/projects", body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.message, JSON.stringify(body)).toEqual(expect.any(String));
      expect(res.body.errors[field], JSON.stringify(body)).toEqual([expect.any(String)]);
      expect(Object.values(res.body.errors).flat().every((m) => typeof m === "string")).toBe(true);
    }
    const missing = await team.api.post("/projects", {});
    expect(missing.body.errors).toEqual({ name: ["This field is required."] });

    const uuid = before.body.data[0].uuid;
    const patch = await team.api.patch(`/projects/${uuid}`, { name: "" });
    expect(patch.status).toBe(422);
    expect(patch.body.errors.name).toBeDefined();
    const env = await team.api.post(`/projects/${uuid}/environments`, { name: "Bad_Name" });
    expect(env.status).toBe(422);
    expect(env.body.errors.name).toBeDefined();

    expect((await team.api.get("/projects")).body).toEqual(before.body);
  });

  it("reports every invalid field at once", async () => {
    const res = await t.api(t.rootToken).post("/permissions/project", { project_uuid: 5, user_id: "x", permission_level: "god" });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors).sort()).toEqual(["permission_level", "project_uuid", "user_id"]);
  });

  it("reports invalid query parameters by name", async () => {
    const res = await t.api(t.rootToken).get("/projects", { page: 0, per_page: 500 });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors).sort()).toEqual(["page", "per_page"]);
  });
});

describe("logging", () => {
  let logged: Instance;
  let server: Server;
  let url: string;
  const lines: string[] = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(...String(chunk).split("\n").filter(Boolean));
        cb();
      },
    });
    // A second instance on the harness's database, logging at info into memory.
    logged = await createInstance(t.config, pino({ level: "info" }, sink));
    server = createServer(logged.app);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const addr = server.address();
    url = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
  });
  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    await logged?.close();
  });

  it("logs each request with method, path and status but never the token or a private key", async () => {
    const keys = new KeyFactory();
    try {
      const key = await keys.generate("ed25519");
      const api = client(url + "/api/v1", t.rootToken);
      const requestId = "log-check-1";
      await api.raw("/teams/current?token=" + t.rootToken, { method: "GET", headers: { "X-Request-Id": requestId } });
      const created = await api.post("/security/keys", { name: "logged", private_key: key.privateKey });
      expect(created.status).toBe(201);
      const bad = await api.post("/security/keys", { name: "bad", private_key: key.privateKey.replace("PRIVATE", "PUBLIC") });
      expect(bad.status).toBe(422);
      await api.patch(`/security/keys/${created.body.uuid}`, { private_key: key.privateKey });
      await client(url + "/api/v1", "cap_" + "Q".repeat(40)).get("/projects");

      await vi.waitFor(() => expect(lines.filter((l) => l.includes('"statusCode"')).length).toBeGreaterThanOrEqual(5));
      const entries = lines.map((l) => JSON.parse(l));
      const first = entries.find((e) => e.req?.id === requestId);
      expect(first).toMatchObject({ req: { method: "GET", path: "/api/v1/teams/current" }, res: { statusCode: 200 } });
      expect(entries.some((e) => e.req?.method === "POST" && e.req?.path === "/api/v1/security/keys" && e.res?.statusCode === 201)).toBe(true);
      expect(entries.some((e) => e.res?.statusCode === 401)).toBe(true);

      const all = lines.join("\n");
      expect(all).not.toContain(t.rootToken);
      expect(all).not.toContain("Q".repeat(40));
      expect(all).not.toContain(key.secretLine);
      expect(all).not.toContain("PRIVATE KEY");
      expect(all.toLowerCase()).not.toContain("bearer");
    } finally {
      keys.cleanup();
    }
  });
});
