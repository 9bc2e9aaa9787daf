import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TokenScope } from "@capstan/shared";
import { routes } from "../../control-plane/src/http/routes/index.js";
import { requiredScope } from "../../control-plane/src/http/route.js";
import { openApiDocument } from "../../control-plane/src/http/openapi.js";
import { client, startTestInstance, type TestInstance } from "./harness.js";

type Json = Record<string, any>;

let t: TestInstance;
let doc: Json;
beforeAll(async () => {
  t = await startTestInstance();
  const res = await fetch(`${t.url}/api/v1/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  doc = (await res.json()) as Json;
});
afterAll(async () => {
  await t?.close();
});

const pathParams = (path: string) => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
const label = (r: { method: string; path: string }) => `${r.method.toUpperCase()} ${r.path}`;

describe("GET /api/v1/openapi.json", () => {
  it("is an OpenAPI 3.1 document generated from the route table, served without a token", () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String), license: { name: expect.any(String) } });
    expect(doc.servers).toEqual([expect.objectContaining({ url: "/api/v1" })]);
    expect(doc).toEqual(JSON.parse(JSON.stringify(openApiDocument(routes))));
  });

  it("documents every route of the table with its method, and nothing else", () => {
    expect(routes.length).toBeGreaterThan(0);
    const documented = Object.entries(doc.paths as Json).flatMap(([path, ops]) => Object.keys(ops as Json).map((m) => `${m.toUpperCase()} ${path}`));
    expect(documented.sort()).toEqual(routes.map(label).sort());
  });

  it.each(routes.map((r) => [label(r), r] as const))("%s: path parameters, token scope, responses", (_, r) => {
    const op = doc.paths[r.path]?.[r.method] as Json;
    expect(op, label(r)).toBeDefined();
    expect(op.operationId).toMatch(/^[A-Za-z][A-Za-z0-9]*$/);
    expect(op.summary).toBe(r.summary);
    expect(op.tags).toEqual([r.tag]);

    const params = (op.parameters ?? []) as Json[];
    const inPath = params.filter((p) => p.in === "path");
    expect(inPath.map((p) => p.name).sort()).toEqual(pathParams(r.path).sort());
    for (const p of inPath) expect(p.required).toBe(true);
    const inQuery = params.filter((p) => p.in === "query").map((p) => p.name);
    expect(inQuery.sort()).toEqual(Object.keys(r.query?.shape ?? {}).sort());

    const statuses = Object.keys(op.responses).map(Number);
    expect(statuses.some((s) => s >= 200 && s < 300)).toBe(true);
    if (r.auth === "none") {
      // Tokenless routes (webhooks): no security requirement, authenticated by signature.
      expect(op.security).toEqual([]);
      expect(op["x-capstan-scope"]).toBeUndefined();
      expect(op.description).toContain("No token");
      for (const s of [401, 429]) expect(statuses).toContain(s);
    } else {
      const scope = requiredScope(r);
      expect(op.security).toEqual([{ bearerAuth: [scope] }]);
      expect(op["x-capstan-scope"]).toBe(scope);
      expect(op.description).toContain(`Token scope: \`${scope}\``);
      for (const s of [401, 403, 429]) expect(statuses).toContain(s);
    }
    if (r.params || r.query || r.body) expect(statuses).toContain(422);
    if (r.body) {
      expect(op.requestBody?.content?.["application/json"]?.schema).toBeDefined();
      for (const s of [400, 413, 415]) expect(statuses).toContain(s);
    } else if (r.rawBody) {
      expect(op.requestBody?.content?.["application/json"]).toBeDefined();
      expect(statuses).toContain(413);
    } else {
      expect(op.requestBody).toBeUndefined();
    }
  });

  it("gives every operation a unique id", () => {
    const ids = routes.map((r) => doc.paths[r.path][r.method].operationId as string);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("has component schemas for the resources and the one error shape", () => {
    const schemas = doc.components.schemas as Json;
    for (const name of ["Project", "Environment", "EnvironmentDetail", "CreatedProject", "Team", "TeamDetail", "Member", "ProjectPermission", "EnvironmentPermission", "PrivateKey", "PageMeta", "Message", "Error"]) {
      expect(schemas[name], name).toBeDefined();
    }
    expect(schemas.Error).toMatchObject({
      type: "object",
      required: ["message"],
      properties: { message: { type: "string" }, errors: { type: "object" } },
    });
    expect(Object.keys(schemas.Project.properties)).toEqual(expect.arrayContaining(["uuid", "name", "description", "environments", "created_at"]));
    expect(Object.keys(schemas.Team.properties)).toEqual(expect.arrayContaining(["id", "name", "description", "created_at"]));
    // The private part of a key is never in a response.
    expect(Object.keys(schemas.PrivateKey.properties)).not.toContain("private_key");
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
  });

  it("resolves every $ref inside the document", () => {
    const refs: string[] = [];
    const walk = (node: unknown) => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === "object") {
        for (const [k, v] of Object.entries(node)) {
          if (k === "$ref" && typeof v === "string") refs.push(v);
          else walk(v);
        }
      }
    };
    walk(doc);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of new Set(refs)) {
      expect(ref, ref).toMatch(/^#\//);
      const target = ref
        .slice(2)
        .split("/")
        .reduce<any>((node, key) => node?.[key.replace(/~1/g, "/").replace(/~0/g, "~")], doc);
      expect(target, ref).toBeDefined();
    }
  });
});

describe("the documented method, path and scope are what the server enforces", () => {
  // A token holding every scope but the documented one: a routed request answers 403
  // "Invalid ability provided." (checked before any parameter or body), an unrouted one 404.
  const tokens = new Map<TokenScope, string>();
  beforeAll(async () => {
    const all: TokenScope[] = ["read", "write", "deploy"];
    for (const scope of all) {
      const { token } = await t.newMember(t.rootTeamId, "owner", all.filter((s) => s !== scope));
      tokens.set(scope, token);
    }
  });

  it.each(routes.filter((r) => r.auth !== "none").map((r) => [label(r), r] as const))("%s", async (_, r) => {
    const path = r.path.replace(/\{[^}]+\}/g, "1");
    const api = client(`${t.url}/api/v1`, tokens.get(requiredScope(r)));
    const res = await api.raw(path, { method: r.method.toUpperCase() });
    expect(res.status, `${label(r)} -> ${JSON.stringify(res.body)}`).toBe(403);
    expect(res.body).toEqual({ message: "Invalid ability provided." });
  });

  // Tokenless routes are routed without a token: the answer is their own, never the token gate's.
  it.each(routes.filter((r) => r.auth === "none").map((r) => [label(r), r] as const))("%s (no token)", async (_, r) => {
    const path = r.path.replace(/\{[^}]+\}/g, "1");
    const res = await client(`${t.url}/api/v1`).raw(path, { method: r.method.toUpperCase() });
    expect(res.status, `${label(r)} -> ${JSON.stringify(res.body)}`).not.toBe(404);
    expect(res.body).not.toEqual({ message: "Unauthenticated." });
  });
});

describe("GET /docs", () => {
  it("serves an HTML reference page that loads the local Swagger UI bundle", async () => {
    const res = await fetch(`${t.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain('<script src="/docs/assets/swagger-ui-bundle.js"></script>');

    // Everything the page loads is served by the instance itself (it works offline).
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThanOrEqual(3);
    for (const asset of assets) {
      expect(asset, asset).toMatch(/^\/docs\//);
      const a = await fetch(t.url + asset);
      expect(a.status, asset).toBe(200);
      expect((await a.arrayBuffer()).byteLength, asset).toBeGreaterThan(0);
    }
  });

  it("serves swagger-ui-bundle.js as JavaScript", async () => {
    const res = await fetch(`${t.url}/docs/assets/swagger-ui-bundle.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^(application|text)\/javascript/);
    const body = await res.text();
    expect(body.length).toBeGreaterThan(100_000);
    expect(body).toContain("SwaggerUIBundle");
  });

  it("points the UI at the instance's own OpenAPI document", async () => {
    const res = await fetch(`${t.url}/docs/init.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/javascript/);
    expect(await res.text()).toContain('"/api/v1/openapi.json"');
  });
});
