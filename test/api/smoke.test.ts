import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TestInstance } from "./harness.js";

let t: TestInstance;
beforeAll(async () => {
  t = await startTestInstance();
});
afterAll(async () => {
  await t?.close();
});

describe("control plane core", () => {
  it("creates a project with its production environment", async () => {
    const api = t.api(t.rootToken);
    const res = await api.post("/projects", { name: "shop", description: "web shop" });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: "shop", description: "web shop", environments: [{ name: "production" }] });
    const list = await api.get("/projects");
    expect(list.body.data.map((p: { uuid: string }) => p.uuid)).toContain(res.body.uuid);
  });
});
