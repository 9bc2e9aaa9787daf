/**
 * Client errors at the HTTP edge: whatever a client sends, the answer is a 4xx with
 * {message, errors?}, never a 500 (issue 15). The route fuzz (fuzz.test.ts) covers every route
 * with random input; this file pins the cases found and the decisions taken.
 */
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type ApiResponse, type TestInstance } from "./harness.js";

let t: TestInstance;
beforeAll(async () => {
  t = await startTestInstance();
});
afterAll(async () => {
  await t?.close();
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
