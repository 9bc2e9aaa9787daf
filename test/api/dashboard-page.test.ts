import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TestInstance } from "./harness.js";
import { ensureDashboardBuilt } from "../browser/support.js";

/**
 * The dashboard's files at / (issue 22; control-plane/src/http/dashboard.ts), next to the API
 * and its reference. Builds the dashboard first when it is not built.
 */
let t: TestInstance;

beforeAll(async () => {
  ensureDashboardBuilt();
  t = await startTestInstance();
});
afterAll(async () => {
  await t?.close();
});

describe("the dashboard at /", () => {
  it("serves the page with a CSP that allows only its own origin", async () => {
    const res = await fetch(t.url + "/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const csp = res.headers.get("content-security-policy")!;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    const html = await res.text();
    expect(html).toContain('<div id="app">');
    // Every script and stylesheet is one of its own files.
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(1);
    for (const ref of refs) expect(ref.startsWith("/assets/") || ref.startsWith("data:")).toBe(true);
    const script = refs.find((r) => r.endsWith(".js"))!;
    const asset = await fetch(t.url + script);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
    expect(asset.headers.get("cache-control")).toMatch(/immutable/);
  });

  it("leaves the API, its reference and unknown paths as they were", async () => {
    expect((await fetch(t.url + "/api/v1/servers")).status).toBe(401);
    expect((await fetch(t.url + "/docs/")).status).toBe(200);
    const missing = await fetch(t.url + "/assets/nope.js");
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { message: string }).message).toBe("Not found.");
    expect((await fetch(t.url + "/nothing-here")).status).toBe(404);
  });
});
