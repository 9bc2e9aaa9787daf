/**
 * Client errors at the HTTP edge: whatever a client sends, the answer is a 4xx with
 * {message, errors?}, never a 500 (issue 15). The route fuzz (fuzz.test.ts) covers every route
 * with random input; this file pins the cases found and the decisions taken.
 */
import { readFileSync } from "node:fs";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { requestBody } from "@capstan/shared";
import { route, type AnyRoute } from "../../control-plane/src/http/route.js";
import { routes as allRoutes } from "../../control-plane/src/http/routes/index.js";
import { openApiDocument } from "../../control-plane/src/http/openapi.js";
import { serveRoutes } from "./support/app.js";
import { startTestInstance, type ApiResponse, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, createImageApp, placement, type AppWorld } from "./support/applications.js";

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

async function send(path: string, init: RequestInit & { headers?: Record<string, string> }): Promise<ApiResponse> {
  return t.api(t.rootToken).raw(path, init);
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const projectCount = async () => (await t.api(t.rootToken).get("/projects")).body.data.length as number;

describe("Content-Encoding of request bodies", () => {
  it.each([
    ["gzip", gzipSync],
    ["deflate", deflateSync],
    ["br", brotliCompressSync],
    ["GZip", gzipSync],
  ] as const)("accepts a JSON body compressed with %s", async (encoding, compress) => {
    const res = await send("/projects", {
      method: "POST",
      body: compress(json({ name: `compressed-${encoding}` })),
      headers: { "Content-Type": "application/json", "Content-Encoding": encoding },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.name).toBe(`compressed-${encoding}`);
  });

  it.each(["gzip", "deflate", "br"])("answers 400 (not 500) for a body that claims %s but is plain JSON, and creates nothing", async (encoding) => {
    const before = await projectCount();
    const res = await send("/projects", {
      method: "POST",
      body: json({ name: "not-compressed" }),
      headers: { "Content-Type": "application/json", "Content-Encoding": encoding },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: `The request body could not be decompressed: it is not valid ${encoding} data.` });
    expect(await projectCount()).toBe(before);
  });

  it.each(["zstd", "compress", "gzip, br", "x-unknown"])("answers 415 for the encoding %j", async (encoding) => {
    const res = await send("/projects", {
      method: "POST",
      body: json({ name: "x" }),
      headers: { "Content-Type": "application/json", "Content-Encoding": encoding },
    });
    expect(res.status).toBe(415);
    expect(res.body).toEqual({ message: "Unsupported Content-Encoding: send the body uncompressed or compressed with gzip, deflate, br." });
  });

  it("applies the body size limit to the inflated body (a small gzip bomb is a 413)", async () => {
    const bomb = gzipSync(Buffer.from(JSON.stringify({ name: "x", description: "a".repeat(4 * 1024 * 1024) })));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const res = await send("/projects", { method: "POST", body: bomb, headers: { "Content-Type": "application/json", "Content-Encoding": "gzip" } });
    expect(res.status).toBe(413);
  });

  it("answers 400 for a corrupt body on a tokenless route (webhooks read the raw body)", async () => {
    const res = await fetch(`${t.url}/api/v1/webhooks/git-apps/00000000-0000-4000-8000-000000000000`, {
      method: "POST",
      body: json({ ref: "refs/heads/main" }),
      headers: { "Content-Type": "application/json", "Content-Encoding": "gzip" },
    });
    expect(res.status).toBe(400);
  });
});

describe("percent-encoding of the path", () => {
  it.each(["/projects/%ZZ", "/projects/%ZZ/environments", "/projects/%E0%A4%A", "/servers/%/validate", "/teams/%C0%AF"])(
    "answers 400 (not 500) for %s",
    async (path) => {
      const res = await send(path, { method: "GET" });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ message: "Malformed percent-encoding in the request path." });
    },
  );

  it("still answers 401 first without a token", async () => {
    const res = await fetch(`${t.url}/api/v1/projects/%ZZ`);
    expect(res.status).toBe(401);
  });
});

describe("control characters (one rule: shared/src/validation/text.ts)", () => {
  const CONTROL = "Must not contain control characters.";
  const CONTROL_IN_TEXT = "Must not contain control characters other than tab, line feed and carriage return.";

  it("refuses a NUL in a name with 422 naming the field, and stores nothing", async () => {
    const before = (await w.api.get("/projects")).body.data.length;
    const res = await w.api.post("/projects", { name: "evil\u0000name" });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ message: "The given data was invalid.", errors: { name: [CONTROL] } });
    expect((await w.api.get("/projects")).body.data.length).toBe(before);
  });

  it("refuses an fqdn holding a newline (it would be stored as a host) on create and on update", async () => {
    const created = await w.api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx:1.27", fqdn: "https://a.example.com\nb.example.com" });
    expect(created.status).toBe(422);
    expect(created.body.errors.fqdn).toContain(CONTROL);
    const app = await createImageApp(w, { fqdn: "https://ok.example.com" });
    for (const fqdn of ["https://x.example.com\n", "https://x.example.com\r\nHost: evil", "x.example.com\t"]) {
      const res = await w.api.patch(`/applications/${app.uuid}`, { fqdn });
      expect(res.status, JSON.stringify(fqdn)).toBe(422);
      expect(res.body.errors.fqdn).toContain(CONTROL);
    }
    expect((await w.api.get(`/applications/${app.uuid}`)).body.fqdn).toBe("https://ok.example.com");
  });

  it("refuses C1 controls and DEL as well as C0", async () => {
    for (const ch of ["\u0001", "\u001b", "\u007f", "\u0085", "\u009b"]) {
      const res = await w.api.post("/projects", { name: `p${ch}` });
      expect(res.status, JSON.stringify(ch)).toBe(422);
      expect(res.body.errors).toEqual({ name: [CONTROL] });
    }
  });

  it("allows tab, LF and CR in multi-line values (env values, compose, Dockerfiles, keys, descriptions), nothing else", async () => {
    const app = await createImageApp(w);
    const ok = await w.api.post(`/applications/${app.uuid}/envs`, { key: "MULTI", value: "line 1\n\tline 2\r\n" });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    const nul = await w.api.post(`/applications/${app.uuid}/envs`, { key: "NUL", value: "a\u0000b" });
    expect(nul.status).toBe(422);
    expect(nul.body.errors.value).toContain(CONTROL_IN_TEXT);
    const esc = await w.api.patch(`/applications/${app.uuid}/envs/bulk`, { variables: [{ key: "A", value: "fine\n" }, { key: "B", value: "\u001b[31mred" }] });
    expect(esc.status).toBe(422);
    expect(esc.body.errors).toEqual({ "variables.1.value": [CONTROL_IN_TEXT] });

    const compose = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: "services:\r\n  web:\n    image: nginx:1.27\t# tab before the comment\n" });
    expect(compose.status, JSON.stringify(compose.body)).toBe(201);
    const badCompose = await w.api.post("/applications/dockercompose", { ...placement(w), docker_compose_raw: "services:\n  web:\u000c\n    image: nginx\n" });
    expect(badCompose.status).toBe(422);
    expect(badCompose.body.errors.docker_compose_raw).toEqual([CONTROL_IN_TEXT]);

    const described = await w.api.post("/projects", { name: "described", description: "first line\nsecond line" });
    expect(described.status).toBe(201);
    expect(described.body.description).toBe("first line\nsecond line");
  });

  it("checks path parameters and query strings too (a NUL never reaches the database)", async () => {
    const path = await w.api.get("/projects/%00abc");
    expect(path.status).toBe(422);
    expect(path.body.errors).toEqual({ uuid: [CONTROL] });
    const query = await w.api.get("/permissions/project", { project_uuid: "a\u0000b" });
    expect(query.status).toBe(422);
    expect(query.body.errors).toEqual({ project_uuid: [CONTROL] });
    // An unknown query parameter is ignored, but not with a control character in it.
    const unknown = await w.api.get("/projects", { cache_buster: "x\ny" });
    expect(unknown.status).toBe(422);
    expect(unknown.body.errors).toEqual({ cache_buster: [CONTROL] });
  });

  it("takes field names like constructor and __proto__ as plain unknown fields (found by the route fuzz: 500 before)", async () => {
    for (const body of ['{"name":"x","constructor":1}', '{"name":"x","__proto__":{"admin":true}}', '{"name":"x","toString":"y"}']) {
      const res = await send("/projects", { method: "POST", body, headers: { "Content-Type": "application/json" } });
      expect(res.status, body).toBe(422);
      expect(Object.keys(res.body.errors as object), body).toEqual([Object.keys(JSON.parse(body) as object)[1]]);
    }
    const query = await send("/applications?__proto__=%00&constructor=x", { method: "GET" });
    expect(query.status).toBe(422);
    expect(JSON.stringify(query.body.errors)).toBe('{"__proto__":["Must not contain control characters."]}');
  });

  it("names a field whose name holds a control character", async () => {
    const res = await w.api.post("/projects", { name: "fine", ["na\u0000me"]: "x" });
    expect(res.status).toBe(422);
    expect(Object.values(res.body.errors as Record<string, string[]>).flat()).toContain("The field name must not contain control characters.");
  });
});

describe("unknown request fields: one rule for every route (422 naming them)", () => {
  const unknown = (...fields: string[]) => Object.fromEntries(fields.map((f) => [f, [expect.stringMatching(new RegExp(`^Unknown field\\(s\\): .*${f.split(".").pop()}.*This path does not take them\\.$`))]]));

  it("refuses an unknown field on routes that used to drop it silently, and changes nothing", async () => {
    const before = (await w.api.get("/projects")).body.data.length;
    const res = await w.api.post("/projects", { name: "colourful", colour: "red" });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ message: "The given data was invalid.", errors: unknown("colour") });
    expect((await w.api.get("/projects")).body.data.length).toBe(before);

    const app = await createImageApp(w);
    const patch = await w.api.patch(`/applications/${app.uuid}`, { name: "renamed", git_brnch: "main" });
    expect(patch.status).toBe(422);
    expect(patch.body.errors).toEqual(unknown("git_brnch"));
    expect((await w.api.get(`/applications/${app.uuid}`)).body.name).toBe(app.name);
  });

  it("refuses unknown fields inside nested objects", async () => {
    const app = await createImageApp(w);
    const res = await w.api.patch(`/applications/${app.uuid}/envs/bulk`, { variables: [{ key: "A", value: "1", secret: true }] });
    expect(res.status).toBe(422);
    expect(res.body.errors).toEqual(unknown("variables.0.secret"));
  });

  it("refuses any field on a route that takes no body; no body or {} is fine", async () => {
    const project = (await w.api.post("/projects", { name: "bodyless" })).body;
    const withField = await w.api.delete(`/projects/${project.uuid}`, { force: true });
    expect(withField.status).toBe(422);
    expect(withField.body.errors).toEqual(unknown("force"));
    const notAnObject = await w.api.delete(`/projects/${project.uuid}`, ["force"]);
    expect(notAnObject.status).toBe(422);
    expect((await w.api.get(`/projects/${project.uuid}`)).status).toBe(200);
    expect((await w.api.delete(`/projects/${project.uuid}`, {})).status).toBe(200);
    const other = (await w.api.post("/projects", { name: "bodyless-2" })).body;
    expect((await w.api.delete(`/projects/${other.uuid}`)).status).toBe(200);
  });

  it("is built into the route table: every body object of every route is strict", () => {
    const bodies = allRoutes.filter((r) => r.body);
    expect(bodies.length).toBeGreaterThan(40);
    for (const r of bodies) {
      const res = r.body!.safeParse({ surely_not_a_field_of_any_route: 1 });
      expect(res.success, `${r.method} ${r.path}`).toBe(false);
      expect(res.error!.issues.some((i) => i.code === "unrecognized_keys"), `${r.method} ${r.path}`).toBe(true);
    }
  });

  describe("compatibility fields (accepted and ignored) and the route table's checks, on a test-only route table", () => {
    const seen: unknown[] = [];
    const testRoutes: AnyRoute[] = [
      route({
        method: "post",
        path: "/compat/{id}",
        tag: "Test",
        summary: "A route with a compatibility field",
        params: z.object({ id: z.string() }),
        body: requestBody({ name: z.string() }),
        compatibleFields: { legacy_flag: "sent by an old client, means nothing here" },
        responses: { 200: { description: "ok" } },
        async handler({ body }) {
          seen.push(body);
          return { body: { ok: true } };
        },
      }),
      route({
        method: "post",
        path: "/compat-bodyless",
        tag: "Test",
        summary: "A bodyless route with a compatibility field",
        compatibleFields: { instant: "an old client's flag" },
        responses: { 200: { description: "ok" } },
        async handler() {
          return { body: { ok: true } };
        },
      }),
    ];
    let served: Awaited<ReturnType<typeof serveRoutes>>;
    beforeAll(async () => {
      served = await serveRoutes(t, testRoutes);
    });
    afterAll(async () => {
      await served?.close();
    });

    it("accepts and ignores a listed field (the handler never sees it); any other unknown field is still a 422", async () => {
      const api = served.api(t.rootToken);
      const ok = await api.post("/compat/1", { name: "n", legacy_flag: { anything: [1, 2] } });
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      expect(seen.at(-1)).toEqual({ name: "n" });
      const bad = await api.post("/compat/1", { name: "n", legacy_flag: true, other: 1 });
      expect(bad.status).toBe(422);
      expect(bad.body.errors).toEqual(unknown("other"));
      // The control-character rule still applies to an ignored field.
      expect((await api.post("/compat/1", { name: "n", legacy_flag: "a\u0000" })).status).toBe(422);
      expect((await api.post("/compat-bodyless", { instant: true })).status).toBe(200);
      expect((await api.post("/compat-bodyless", { instant: true, nope: 1 })).status).toBe(422);
    });

    it("documents a compatibility field in the OpenAPI document as a deprecated property", () => {
      const doc = openApiDocument(testRoutes) as any;
      const props = doc.paths["/compat/{id}"].post.requestBody.content["application/json"].schema.properties;
      expect(props.name).toBeDefined();
      expect(props.legacy_flag).toEqual({ deprecated: true, description: expect.stringContaining("sent by an old client") });
      expect(doc.paths["/compat-bodyless"].post.requestBody.content["application/json"].schema.properties.instant.deprecated).toBe(true);
    });

    it("refuses to build an app whose route table has a loose body or a compatibility field that is a body field", async () => {
      const loose = route({ method: "post", path: "/loose", tag: "Test", summary: "s", body: z.object({ a: z.string() }), responses: { 200: { description: "ok" } }, handler: async () => ({ body: {} }) });
      const nested = route({ method: "post", path: "/nested", tag: "Test", summary: "s", body: requestBody({ a: z.array(z.object({ b: z.string() })) }), responses: { 200: { description: "ok" } }, handler: async () => ({ body: {} }) });
      const clash = route({ method: "post", path: "/clash", tag: "Test", summary: "s", body: requestBody({ a: z.string() }), compatibleFields: { a: "x" }, responses: { 200: { description: "ok" } }, handler: async () => ({ body: {} }) });
      await expect(serveRoutes(t, [loose])).rejects.toThrow(/POST \/loose: body objects not built with requestBody\(\) .* at \(top\)/);
      await expect(serveRoutes(t, [nested])).rejects.toThrow(/POST \/nested: .* at a\[\]/);
      await expect(serveRoutes(t, [clash])).rejects.toThrow(/POST \/clash: compatibility field a is a field of the body/);
    });
  });

  describe("nested compatibility fields (list[].field: in every object of a list), on a test-only route table", () => {
    const seen: unknown[] = [];
    const nested = route({
      method: "post",
      path: "/compat-nested",
      tag: "Test",
      summary: "A route with a compatibility field in the items of a list",
      body: requestBody({ items: z.array(requestBody({ key: z.string() })).optional(), name: z.string().optional() }),
      compatibleFields: { "items[].legacy": "an old client's per-item flag" },
      responses: { 200: { description: "ok" } },
      async handler({ body }) {
        seen.push(body);
        return { body: { ok: true } };
      },
    });

    it("accepts and ignores the field in every item; anywhere else it is still an unknown field", async () => {
      const served = await serveRoutes(t, [nested]);
      try {
        const api = served.api(t.rootToken);
        const ok = await api.post("/compat-nested", { items: [{ key: "a", legacy: { x: 1 } }, { key: "b" }] });
        expect(ok.status, JSON.stringify(ok.body)).toBe(200);
        expect(seen.at(-1)).toEqual({ items: [{ key: "a" }, { key: "b" }] });
        const other = await api.post("/compat-nested", { items: [{ key: "a", legacy: true, other: 1 }] });
        expect(other.status).toBe(422);
        expect(other.body.errors).toEqual(unknown("items.0.other"));
        const top = await api.post("/compat-nested", { name: "n", legacy: true });
        expect(top.status).toBe(422);
        expect(top.body.errors).toEqual(unknown("legacy"));
        // A "__proto__" key of the client stays plain data on the way through.
        expect((await api.post("/compat-nested", JSON.parse('{"items":[{"key":"a","legacy":1}],"__proto__":{"x":1}}'))).status).toBe(422);
      } finally {
        await served.close();
      }
    });

    it("documents it in the item schema as a deprecated property", () => {
      const doc = openApiDocument([nested]) as any;
      const items = doc.paths["/compat-nested"].post.requestBody.content["application/json"].schema.properties.items.items;
      expect(items.properties.key).toBeDefined();
      expect(items.properties.legacy).toEqual({ deprecated: true, description: expect.stringContaining("per-item flag") });
    });

    it("refuses to build an app whose nested compatibility field is a field of the items, points outside the body, or has no body", async () => {
      const body = requestBody({ items: z.array(requestBody({ key: z.string() })) });
      const make = (field: string, withBody = true) =>
        route({ method: "post", path: "/n", tag: "Test", summary: "s", ...(withBody ? { body } : {}), compatibleFields: { [field]: "x" }, responses: { 200: { description: "ok" } }, handler: async () => ({ body: {} }) });
      await expect(serveRoutes(t, [make("items[].key")])).rejects.toThrow(/POST \/n: compatibility field items\[\]\.key is a field of the body/);
      await expect(serveRoutes(t, [make("nothing[].x")])).rejects.toThrow(/POST \/n: compatibility field nothing\[\]\.x .*not inside one of its objects/);
      await expect(serveRoutes(t, [make("items[].x", false)])).rejects.toThrow(/POST \/n: compatibility field items\[\]\.x is nested, but the route takes no body/);
    });
  });

  it("docs/compatibility.md lists exactly the compatibility fields of the route table", () => {
    const doc = readFileSync(new URL("../../docs/compatibility.md", import.meta.url), "utf8");
    const section = doc.split("## Accepted and ignored fields")[1]!.split("\n## ")[0]!;
    const rows = section
      .split("\n")
      .filter((l) => /^\| `?[A-Z]+ /.test(l))
      .map((l) => l.split("|").map((c) => c.trim().replace(/`/g, "")))
      .map((c) => `${c[1]} ${c[2]}`);
    const declared = allRoutes.flatMap((r) => Object.keys(r.compatibleFields ?? {}).map((f) => `${r.method.toUpperCase()} ${r.path} ${f}`));
    expect(rows.sort()).toEqual(declared.sort());
  });
});

describe("requests that lose a race with a concurrent change (found by the route fuzz on PostgreSQL)", () => {
  it("answers the real database errors of a lost race with 404/409, on both databases", async () => {
    const testRoutes: AnyRoute[] = [
      route({ method: "post", path: "/race/missing", tag: "Test", summary: "s", responses: { 200: { description: "ok" } }, handler: async ({ services }) => {
        await services.db.project.delete({ where: { id: 2_000_000_000 } });
        return { body: {} };
      } }),
      route({ method: "post", path: "/race/reference", tag: "Test", summary: "s", responses: { 200: { description: "ok" } }, handler: async ({ services }) => {
        await services.db.environment.create({ data: { uuid: `race-${Date.now()}`, projectId: 2_000_000_000, name: "gone" } });
        return { body: {} };
      } }),
      route({ method: "post", path: "/race/duplicate", tag: "Test", summary: "s", responses: { 200: { description: "ok" } }, handler: async ({ services }) => {
        const env = await services.db.environment.findFirstOrThrow();
        await services.db.environment.create({ data: { uuid: env.uuid, projectId: env.projectId, name: "dup" } });
        return { body: {} };
      } }),
    ];
    const served = await serveRoutes(t, testRoutes);
    try {
      const api = served.api(t.rootToken);
      expect(await api.post("/race/missing")).toMatchObject({ status: 404, body: { message: "Not found: it was removed while this request ran." } });
      expect(await api.post("/race/reference")).toMatchObject({ status: 409, body: { message: expect.stringMatching(/was removed or changed while it ran/) } });
      expect(await api.post("/race/duplicate")).toMatchObject({ status: 409, body: { message: expect.stringMatching(/at the same time/) } });
    } finally {
      await served.close();
    }
  });

  it("two deletes of one project at once: one 200, the other 404, never 500", async () => {
    for (let i = 0; i < 5; i++) {
      const project = (await w.api.post("/projects", { name: `raced-${i}` })).body;
      const answers = await Promise.all([1, 2, 3].map(() => w.api.delete(`/projects/${project.uuid}`)));
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses.filter((s) => s === 200), JSON.stringify(answers.map((a) => a.body))).toHaveLength(1);
      expect(statuses.every((s) => s === 200 || s === 404), JSON.stringify(statuses)).toBe(true);
    }
  });

  it("reads of an application, its deployments, a database and the grants while their project is deleted: 200 or 404, never 500", { timeout: 120_000 }, async () => {
    // Prisma reads an object's relations after the object: a project deleted in between left
    // GET /applications/{uuid} with an application without environment (500, found by the
    // route fuzz on PostgreSQL; db/relations.ts). Reads run until the delete has answered.
    const member = await t.newMember(w.team.teamId, "member");
    const seen = new Map<number, number>();
    for (let i = 0; i < 25; i++) {
      const project = (await w.api.post("/projects", { name: `torn-${i}` })).body;
      const where = { ...placement(w), project_uuid: project.uuid };
      const app = (await w.api.post("/applications/dockerimage", { ...where, docker_registry_image_name: "nginx:1.27" })).body;
      const db = (await w.api.post("/databases/redis", { ...where, instant_deploy: false })).body;
      expect((await w.api.post("/permissions/project", { project_uuid: project.uuid, user_id: member.userId, permission_level: "view_only" })).status).toBe(201);
      const reads = [`/applications/${app.uuid}`, `/deployments/applications/${app.uuid}`, `/databases/${db.uuid}`, `/permissions/project`, `/networks/resource/application/${app.uuid}`];
      let deleted = false;
      const deletion = w.api.delete(`/projects/${project.uuid}`).finally(() => (deleted = true));
      const answers = await Promise.all(
        reads.map(async (path) => {
          const out: ApiResponse[] = [];
          while (!deleted) out.push(await w.api.get(path));
          return out;
        }),
      );
      expect((await deletion).status).toBe(200);
      for (const r of answers.flat()) {
        seen.set(r.status, (seen.get(r.status) ?? 0) + 1);
        expect([200, 404], JSON.stringify(r.body)).toContain(r.status);
      }
    }
    expect(seen.get(200)).toBeGreaterThan(0);
  });
});
