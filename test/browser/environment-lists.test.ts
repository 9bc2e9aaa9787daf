import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { startTestInstance, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { appWorld, createImageApp, ok, placement, type AppWorld } from "../api/support/applications.js";
import { Sessions } from "../../control-plane/src/services/sessions.js";
import { accessibilityProblems, launch, recordingPage, requireBuiltDashboard, screenshot, signInAs } from "./support.js";

/**
 * An environment's resources page with more than a page of the API's lists (issue 22): 130
 * services and 105 applications in one environment all show, read a page of 100 at a time
 * (GET /services has no environment filter, so the team's services are paged through), never
 * one request per item. And an environment with nothing in it says how to put something there.
 */
let t: TestInstance;
let w: AppWorld;
let browser: Browser;
let page: Page;
let requests: string[];
let foreign: () => string[];
const keys = new KeyFactory();
const PASSWORD = "a password for the browser";
const SERVICES = 130;
const APPS = 105;

/** Runs the creates `limit` at a time. */
async function inParallel(n: number, limit: number, make: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < n) await make(next++);
    }),
  );
}

beforeAll(async () => {
  requireBuiltDashboard();
  t = await startTestInstance();
  w = await appWorld(t, keys);
  await inParallel(SERVICES, 4, (i) => ok(w.api.post("/services", { ...placement(w), type: "uptime-kuma", name: `svc-${String(i).padStart(3, "0")}` }), "service"));
  await inParallel(APPS, 4, (i) => createImageApp(w, { name: `app-${String(i).padStart(3, "0")}` }));
  // Another environment's service: not listed in production.
  await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "staging" }), "environment");
  await ok(w.api.post("/services", { ...placement(w, "staging"), type: "uptime-kuma", name: "staging-svc" }), "service");
  await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "empty" }), "environment");
  const userId = await t.instance.admin.createUser("Ada Admin", "ada-lists@example.test");
  await t.instance.admin.setMember(w.team.teamId, userId, "admin");
  await new Sessions(t.instance.database.prisma).setPassword(userId, PASSWORD);
  browser = await launch();
  const context = await browser.newContext({ viewport: { width: 360, height: 780 } });
  ({ page, requests, foreign } = await recordingPage(context, t.url));
  await signInAs(page, t.url, "ada-lists@example.test", PASSWORD);
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  keys.cleanup();
});

describe("environment resources beyond one page", () => {
  it(`lists all ${SERVICES} services and ${APPS} applications, a page of 100 per request`, async () => {
    const sent = requests.length;
    await page.goto(`${t.url}/#/projects/${w.project.uuid}/production`);
    const services = page.getByRole("list", { name: "Services" }).locator("li.resource");
    const apps = page.getByRole("list", { name: "Applications" }).locator("li.resource");
    await expect.poll(() => services.count(), { timeout: 15_000 }).toBe(SERVICES);
    expect(await apps.count()).toBe(APPS);
    expect(await services.last().locator("h3").textContent()).toBe(`svc-${SERVICES - 1}`);
    expect(await page.getByText("staging-svc").count()).toBe(0);
    const paths = requests.slice(sent).map((u) => new URL(u)).filter((u) => u.pathname.startsWith("/api/v1/"));
    const serviceReads = paths.filter((u) => u.pathname.startsWith("/api/v1/services"));
    // 131 services in the team: two pages of 100, and no read of a single service or application.
    expect(serviceReads.map((u) => `${u.pathname}${u.search}`).sort()).toEqual(["/api/v1/services?per_page=100&page=1", "/api/v1/services?per_page=100&page=2"]);
    expect(paths.filter((u) => /^\/api\/v1\/(services|applications)\/[^/]+/.test(u.pathname))).toEqual([]);
    expect(foreign()).toEqual([]);
  });

  it("the Projects page and a project's page: no serious accessibility problem, 360 px wide (screenshots)", async () => {
    await page.goto(`${t.url}/#/projects`);
    await page.getByRole("link", { name: "shop" }).waitFor();
    await screenshot(page, "projects-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
    await page.getByRole("link", { name: "shop" }).click();
    await page.locator("li.environment", { hasText: "production" }).getByText(`${APPS} applications, 0 databases, ${SERVICES} services`).waitFor();
    await screenshot(page, "project-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
  });

  it("an empty environment says how to create resources and where they then deploy", async () => {
    await page.goto(`${t.url}/#/projects/${w.project.uuid}`);
    await page.locator("li.environment", { hasText: "empty" }).getByText("Empty: open it to see how to add resources.").waitFor();
    await page.getByRole("link", { name: "empty", exact: true }).click();
    await page.getByRole("heading", { name: "Nothing here yet" }).waitFor();
    const text = await page.locator(".empty").textContent();
    expect(text).toContain("POST /api/v1/applications/dockerimage");
    expect(text).toContain("POST /api/v1/services");
    expect(text).toContain(w.project.uuid);
    await screenshot(page, "environment-empty-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
  });
});
