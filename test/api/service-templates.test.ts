import { ServiceTemplateList } from "@capstan/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";

/** GET /services/templates: the built-in catalog as a team member browses it (issue 17). */
let t: TestInstance;
let team: TeamFixture;

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam();
});
afterAll(async () => {
  await t?.close();
});

const names = (body: { data: { name: string }[] }) => body.data.map((x) => x.name);

describe("GET /services/templates", () => {
  it("lists the built-in catalog in name order, in the documented shape", async () => {
    const res = await team.api.get("/services/templates");
    expect(res.status).toBe(200);
    const list = ServiceTemplateList.parse(res.body);
    expect(list.data.length).toBeGreaterThanOrEqual(30);
    expect(names(list)).toEqual([...names(list)].sort((a, b) => a.localeCompare(b)));
    const n8n = list.data.find((x) => x.name === "n8n");
    expect(n8n).toMatchObject({ source: "built-in", documentation: expect.stringMatching(/^https:\/\//), slogan: expect.any(String) });
    expect(n8n!.tags).toMatch(/^[^,\s]+(,[^,\s]+)*$/);
    expect(res.body.meta).toBeUndefined();
  });

  it("filters by category, tag and words, and pages", async () => {
    const all = ServiceTemplateList.parse((await team.api.get("/services/templates")).body).data;
    const monitoring = (await team.api.get("/services/templates", { category: "Monitoring" })).body;
    expect(monitoring.data.length).toBeGreaterThan(0);
    expect(names(monitoring)).toEqual(all.filter((x) => x.category === "monitoring").map((x) => x.name));
    const someTag = all[0]!.tags.split(",")[0]!;
    const tagged = (await team.api.get("/services/templates", { tag: someTag.toUpperCase() })).body;
    expect(names(tagged)).toContain(all[0]!.name);
    expect(tagged.data.every((x: { tags: string }) => x.tags.toLowerCase().split(",").includes(someTag.toLowerCase()))).toBe(true);
    expect(names((await team.api.get("/services/templates", { search: "N8N" })).body)).toContain("n8n");
    expect((await team.api.get("/services/templates", { search: "no-such-software-anywhere" })).body.data).toEqual([]);
    const page = (await team.api.get("/services/templates", { page: 2, per_page: 5 })).body;
    expect(names(page)).toEqual(all.slice(5, 10).map((x) => x.name));
    expect(page.meta).toEqual({ current_page: 2, per_page: 5, total: all.length, last_page: Math.ceil(all.length / 5) });
  });

  it("refuses bad filters with 422 naming them", async () => {
    const res = await team.api.get("/services/templates", { per_page: 0, category: "x".repeat(101) });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors).sort()).toEqual(["category", "per_page"]);
  });

  it("needs a token with the read scope", async () => {
    const writeOnly = await t.newMember(team.teamId, "member", ["write"]);
    expect((await t.api(writeOnly.token).get("/services/templates")).status).toBe(403);
    expect((await t.api().get("/services/templates")).status).toBe(401);
  });
});
