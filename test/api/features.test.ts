/**
 * The paid-feature gate (issue 15, docs/features.md): a route declares its feature in the route
 * table; a team without it gets 402 naming the feature, after the token and scope checks and
 * before anything else. No real route needs a feature yet, so the gate is driven through a
 * test-only route table on a real control plane (its tokens, teams and features).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { FEATURES, requestBody, resourceId, Uuid } from "@capstan/shared";
import { route, type AnyRoute } from "../../control-plane/src/http/route.js";
import { openApiDocument } from "../../control-plane/src/http/openapi.js";
import { routes as allRoutes } from "../../control-plane/src/http/routes/index.js";
import { startTestInstance, type TestInstance } from "./harness.js";
import { serveRoutes } from "./support/app.js";
import { requestStatements } from "./support/statements.js";

let t: TestInstance;
let served: Awaited<ReturnType<typeof serveRoutes>>;
const calls: string[] = [];

const testRoutes: AnyRoute[] = [
  route({
    method: "post",
    path: "/gated/{uuid}",
    tag: "Test",
    summary: "Needs DNS_MULTI_DOMAIN",
    feature: "DNS_MULTI_DOMAIN",
    params: z.object({ uuid: resourceId("project", Uuid) }),
    body: requestBody({ name: z.string().min(3) }),
    responses: { 200: { description: "ok" } },
    async handler({ params, body }) {
      calls.push(`gated ${params.uuid} ${body.name}`);
      return { body: { ok: true } };
    },
  }),
  route({
    method: "get",
    path: "/gated-read",
    tag: "Test",
    summary: "Needs REGISTRY_MANAGEMENT",
    feature: "REGISTRY_MANAGEMENT",
    responses: { 200: { description: "ok" } },
    async handler() {
      calls.push("gated-read");
      return { body: { ok: true } };
    },
  }),
  route({
    method: "get",
    path: "/free",
    tag: "Test",
    summary: "Needs no feature",
    responses: { 200: { description: "ok" } },
    async handler() {
      calls.push("free");
      return { body: { ok: true } };
    },
  }),
];

beforeAll(async () => {
  t = await startTestInstance();
  served = await serveRoutes(t, testRoutes);
});
afterAll(async () => {
  await served?.close();
  await t?.close();
});

const PAYMENT = (feature: string) => ({ message: expect.stringMatching(new RegExp(`^This needs the paid feature ${feature}, which is not enabled for this team\\.`)) });

describe("the feature gate", () => {
  it("answers 402 {message} naming the feature before validation and before the handler, for every role", async () => {
    const team = await t.newTeam();
    const viewer = await t.newMember(team.teamId, "viewer");
    for (const token of [team.token, viewer.token]) {
      const before = calls.length;
      // Invalid path and body: the gate answers first, and says nothing about them.
      const res = await served.api(token).post("/gated/%00", { name: 1, unknown: true });
      expect(res.status).toBe(402);
      expect(res.body).toEqual(PAYMENT("DNS_MULTI_DOMAIN"));
      expect((await served.api(token).get("/gated-read")).body).toEqual(PAYMENT("REGISTRY_MANAGEMENT"));
      expect(calls.length).toBe(before);
    }
  });

  it("comes after the token (401) and the scope check (403)", async () => {
    const team = await t.newTeam();
    expect((await served.api().post("/gated/x", {})).status).toBe(401);
    const readOnly = await t.newMember(team.teamId, "owner", ["read"]);
    const res = await served.api(readOnly.token).post("/gated/x", { name: "abc" });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: "Invalid ability provided." });
  });

  it("lets the team through once its feature is enabled, on the very next request, and stops it again when disabled", async () => {
    const team = await t.newTeam();
    expect((await served.api(team.token).post("/gated/abc", { name: "abc" })).status).toBe(402);
    await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["DNS_MULTI_DOMAIN"] });
    const invalid = await served.api(team.token).post("/gated/abc", { name: 1 });
    expect(invalid.status).toBe(422);
    const before = calls.length;
    const ok = await served.api(team.token).post("/gated/abc", { name: "abcd" });
    expect(ok.status).toBe(200);
    expect(calls.slice(before)).toEqual(["gated abc abcd"]);
    // Another feature is still off.
    expect((await served.api(team.token).get("/gated-read")).status).toBe(402);
    await t.instance.admin.setTeamFeatures(team.teamId, { disable: ["DNS_MULTI_DOMAIN"] });
    expect((await served.api(team.token).post("/gated/abc", { name: "abcd" })).status).toBe(402);
  });

  it("is per team: another team's features do not count", async () => {
    const paying = await t.newTeam();
    const other = await t.newTeam();
    await t.instance.admin.setTeamFeatures(paying.teamId, { enable: [...FEATURES] });
    expect((await served.api(paying.token).get("/gated-read")).status).toBe(200);
    expect((await served.api(other.token).get("/gated-read")).status).toBe(402);
  });

  it("the root team has every feature; routes without a feature are open to every team", async () => {
    expect((await served.api(t.rootToken).get("/gated-read")).status).toBe(200);
    expect((await t.api(t.rootToken).get("/teams/current")).body.features).toEqual([...FEATURES]);
    const team = await t.newTeam();
    expect((await served.api(team.token).get("/free")).status).toBe(200);
  });

  it("costs no query of its own: a gated request reads the database exactly as often as an ungated one", async () => {
    const team = await t.newTeam();
    await served.api(team.token).get("/free"); // warm: lastUsedAt is written once a minute
    // The plain-SQL reads (the token query is one) show the gate adds none.
    const count = async (path: string) => (await requestStatements(t.instance.services.reader, () => served.api(team.token).get(path))).length;
    const free = await count("/free");
    expect(free).toBe(1); // the token query
    expect(await count("/gated-read")).toBe(free); // refused
    await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["REGISTRY_MANAGEMENT"] });
    expect(await count("/gated-read")).toBe(free); // let through
  });

  it("a team's features show in GET /teams/current (read-only)", async () => {
    const team = await t.newTeam();
    await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["PROXY_LABEL_OVERRIDES", "CLUSTER_MANAGEMENT"] });
    const res = await team.api.get("/teams/current");
    expect(res.body.features).toEqual(["CLUSTER_MANAGEMENT", "PROXY_LABEL_OVERRIDES"]);
    // Not writable through the API: there is no such route, and no body field for it.
    expect((await team.api.patch("/teams/current", { features: [...FEATURES] })).status).toBe(404);
  });
});

describe("the OpenAPI document and the route table know the field", () => {
  it("lists the 402 and x-capstan-feature for a gated route, and neither for the others", () => {
    const doc = openApiDocument(testRoutes) as any;
    const gated = doc.paths["/gated/{uuid}"].post;
    expect(gated["x-capstan-feature"]).toBe("DNS_MULTI_DOMAIN");
    expect(gated.responses["402"]).toEqual({ $ref: "#/components/responses/PaymentRequired" });
    expect(gated.description).toContain("Paid feature: `DNS_MULTI_DOMAIN`");
    expect(doc.components.responses.PaymentRequired.description).toMatch(/paid feature/);
    const free = doc.paths["/free"].get;
    expect(free["x-capstan-feature"]).toBeUndefined();
    expect(free.responses["402"]).toBeUndefined();
  });

  it("every real route's feature, if any, is a known one and the document lists its 402", () => {
    const doc = openApiDocument(allRoutes) as any;
    for (const r of allRoutes) {
      const op = doc.paths[r.path][r.method];
      if (r.feature) {
        expect(FEATURES).toContain(r.feature);
        expect(op.responses["402"], `${r.method} ${r.path}`).toBeDefined();
      } else {
        expect(op.responses["402"], `${r.method} ${r.path}`).toBeUndefined();
      }
    }
  });

  it("the OpenAPI lint's capstan/feature-gate rule passes a generated gated operation and catches a missing or stray 402", async () => {
    // @ts-expect-error: a plain-JavaScript Redocly plugin (scripts/redocly-capstan.js) without types.
    const plugin = (await import("../../scripts/redocly-capstan.js")).default();
    const rule = plugin.rules.oas3["feature-gate"]();
    const lint = (operation: unknown) => {
      const reports: string[] = [];
      const location = { child: () => ({ key: () => ({}) }) };
      rule.Operation(operation, { report: (r: { message: string }) => reports.push(r.message), location });
      return reports;
    };
    const doc = openApiDocument(testRoutes) as any;
    const gated = doc.paths["/gated/{uuid}"].post;
    expect(lint(gated)).toEqual([]);
    expect(lint(doc.paths["/free"].get)).toEqual([]);
    const { 402: _, ...without402 } = gated.responses;
    expect(lint({ ...gated, responses: without402 })).toEqual([expect.stringContaining("needs the paid feature DNS_MULTI_DOMAIN")]);
    const { "x-capstan-feature": __, ...unnamed } = gated;
    expect(lint(unnamed)).toEqual([expect.stringContaining("names no paid feature")]);
  });

  it("refuses a feature on a route without a token", async () => {
    const bad = route({ method: "post", path: "/hook", tag: "Test", summary: "s", auth: "none", feature: "DNS_ENV_BINDINGS", responses: { 200: { description: "ok" } }, handler: async () => ({ body: {} }) });
    await expect(serveRoutes(t, [bad])).rejects.toThrow(/POST \/hook: a route without a token cannot need a feature/);
  });
});
