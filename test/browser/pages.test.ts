import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import type { JobEnvelope } from "@capstan/shared";
import { startTestInstance, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { appWorld, createImageApp, ok, placement, until, type AppWorld } from "../api/support/applications.js";
import { connectAgent, type ScriptedAgent } from "../api/support/fake-agent.js";
import { deployResult } from "../api/support/deployments.js";
import { Sessions } from "../../control-plane/src/services/sessions.js";
import { accessibilityProblems, launch, recordingPage, requireBuiltDashboard, screenshot } from "./support.js";

/**
 * The dashboard's team, S3 storage and project pages in Chromium (issue 22): the team's members
 * and paid features; backup encryption set with a passphrase never shown again; Projects →
 * environments → resources, where a member with view_only sees the resources and no action and a
 * member with deploy deploys from the page, follows the log live until the deployment ends, and
 * cancels another. One control plane, each user signed in once.
 */
let t: TestInstance;
let w: AppWorld;
let browser: Browser;
let agent: ScriptedAgent;
let app: { uuid: string; name: string };
let dbUuid: string;
const held: JobEnvelope[] = [];
const keys = new KeyFactory();
const PASSWORD = "a password for the browser";
const pages: Record<"viewer" | "deployer" | "admin", { page: Page; foreign: () => string[] }> = {} as never;

async function member(name: string, email: string, level: "view_only" | "deploy" | "admin"): Promise<void> {
  const userId = await t.instance.admin.createUser(name, email);
  await t.instance.admin.setMember(w.team.teamId, userId, level === "admin" ? "admin" : "member");
  if (level !== "admin") await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: userId, permission_level: level }), "grant");
  await new Sessions(t.instance.database.prisma).setPassword(userId, PASSWORD);
}

async function signedIn(email: string): Promise<{ page: Page; foreign: () => string[] }> {
  const context = await browser.newContext({ viewport: { width: 360, height: 780 } });
  const r = await recordingPage(context, t.url);
  await r.page.goto(t.url + "/");
  await r.page.getByLabel("Email").fill(email);
  await r.page.getByLabel("Password").fill(PASSWORD);
  await r.page.getByRole("button", { name: "Sign in" }).click();
  await r.page.getByRole("heading", { name: "Fleet" }).waitFor({ timeout: 10_000 });
  return r;
}

const resource = (page: Page, uuid: string) => page.locator(`li.resource[data-uuid="${uuid}"]`);

beforeAll(async () => {
  requireBuiltDashboard();
  t = await startTestInstance();
  w = await appWorld(t, keys);
  agent = await connectAgent(t.url, w.server.agentToken);
  agent.serve("server.prepare", () => ({ ok: true, result: { created: [], existing: ["capstan"] } }));
  agent.serve("app.deploy", (job) => {
    held.push(job);
    return { hold: true };
  });
  await agent.hello();
  await until(async () => (await w.api.get(`/servers/${w.server.uuid}`)).body.status === "reachable");
  app = await createImageApp(w, { name: "storefront" });
  dbUuid = (await ok(w.api.post("/databases/postgresql", { ...placement(w), name: "orders" }), "database")).uuid;
  await member("Vera Viewonly", "vera@example.test", "view_only");
  await member("Dev Deployer", "dev@example.test", "deploy");
  await member("Ada Admin", "ada@example.test", "admin");
  browser = await launch();
  pages.viewer = await signedIn("vera@example.test");
  pages.deployer = await signedIn("dev@example.test");
  pages.admin = await signedIn("ada@example.test");
}, 120_000);

afterAll(async () => {
  await browser?.close();
  agent?.close();
  await t?.close();
  keys.cleanup();
});

async function openEnvironment(page: Page): Promise<void> {
  await page.getByRole("link", { name: "Projects" }).click();
  await page.getByRole("heading", { name: "Projects" }).waitFor();
  await page.getByRole("link", { name: "shop" }).click();
  await page.getByRole("heading", { name: "shop" }).waitFor();
  await page.getByRole("link", { name: "production" }).click();
  await page.getByRole("heading", { name: "production" }).waitFor();
  await resource(page, app.uuid).waitFor();
  await page.locator(".level").waitFor();
}

describe("team page in Chromium", () => {
  it("members and their roles, read-only; paid features enabled or shown as 402 areas", async () => {
    await t.instance.admin.setTeamFeatures(w.team.teamId, { enable: ["CLUSTER_MANAGEMENT"] });
    const { page } = pages.deployer;
    await page.getByRole("link", { name: "Team" }).click();
    await page.getByRole("heading", { name: /^Team: / }).waitFor();
    const member = (name: string) => page.locator("li.member", { hasText: name });
    expect(await member("Vera Viewonly").locator(".role").textContent()).toBe("member");
    expect(await member("Dev Deployer").locator(".role").textContent()).toBe("member");
    expect(await page.locator("li.member .role", { hasText: "owner" }).count()).toBeGreaterThanOrEqual(1);
    // Read-only: nothing on the page changes a member.
    expect(await page.locator("li.member button, li.member select, li.member input").count()).toBe(0);
    const feature = (f: string) => page.locator(`li.feature[data-feature="${f}"]`);
    expect(await feature("CLUSTER_MANAGEMENT").getAttribute("data-enabled")).toBe("true");
    expect(await feature("REGISTRY_MANAGEMENT").getAttribute("data-enabled")).toBe("false");
    expect(await feature("REGISTRY_MANAGEMENT").textContent()).toContain("402");
    // And the API agrees: the area shown as not enabled answers 402, the enabled one does not.
    expect((await w.api.get("/registries")).status).toBe(402);
    expect((await w.api.get("/clusters")).status).not.toBe(402);
    await screenshot(page, "team-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
  });
});

describe("S3 storages in Chromium", () => {
  const PASSPHRASE = "correct horse battery staple";
  it("an admin turns backup encryption on with a passphrase that is never shown again, then off; a member cannot", async () => {
    const created = await ok(
      w.api.post("/s3-storages", { name: "offsite", endpoint: "https://s3.example.test", bucket: "backups", access_key: "AKIAEXAMPLE1", secret_key: "secret-example-1" }),
      "storage",
    );
    const id = created.data.id as number;
    const { page } = pages.admin;
    await page.getByRole("link", { name: "S3 storages" }).click();
    const card = page.locator(`li.storage[data-id="${id}"]`);
    await card.waitFor();
    expect(await card.getAttribute("data-encrypted")).toBe("false");
    await card.getByLabel("Encryption passphrase").fill(PASSPHRASE);
    await card.getByLabel("Passphrase again").fill("not the same passphrase");
    await card.getByRole("button", { name: "Turn encryption on" }).click();
    await expect.poll(() => card.getByRole("alert").textContent()).toBe("The two passphrases differ.");
    expect((await w.api.get(`/s3-storages/${id}`)).body.is_encrypted).toBe(false);
    await card.getByLabel("Passphrase again").fill(PASSPHRASE);
    await card.getByRole("button", { name: "Turn encryption on" }).click();
    await expect.poll(() => card.getAttribute("data-encrypted")).toBe("true");
    expect((await w.api.get(`/s3-storages/${id}`)).body.is_encrypted).toBe(true);
    // Set here, never shown again: not in the page, not after a reload, not in any API answer.
    expect(await card.getByLabel("New passphrase").inputValue()).toBe("");
    expect(await page.content()).not.toContain(PASSPHRASE);
    expect(JSON.stringify((await w.api.get(`/s3-storages/${id}`)).body)).not.toContain(PASSPHRASE);
    await screenshot(page, "storages-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
    await page.reload();
    await card.waitFor();
    expect(await page.content()).not.toContain(PASSPHRASE);
    await card.getByRole("button", { name: "Turn encryption off" }).click();
    await expect.poll(() => card.getAttribute("data-encrypted")).toBe("false");
    expect((await w.api.get(`/s3-storages/${id}`)).body.is_encrypted).toBe(false);
    // A member sees the storage and its state, and no form.
    const member = pages.deployer.page;
    await member.getByRole("link", { name: "S3 storages" }).click();
    const seen = member.locator(`li.storage[data-id="${id}"]`);
    await seen.waitFor();
    expect(await seen.locator("form").count()).toBe(0);
  });
});

describe("projects in Chromium", () => {
  it("view_only: the project, its environment and resources with status, and no action at all", async () => {
    const { page } = pages.viewer;
    await openEnvironment(page);
    expect(await resource(page, app.uuid).locator("h3").textContent()).toBe("storefront");
    expect(await resource(page, app.uuid).locator(".badge").textContent()).toBe("exited");
    expect(await resource(page, dbUuid).locator("h3").textContent()).toBe("orders");
    expect(await resource(page, dbUuid).locator(".badge").textContent()).toBe("exited");
    expect(await page.locator(".level").getAttribute("data-level")).toBe("view_only");
    expect(await page.getByRole("button", { name: /^(Deploy|Start|Stop|Restart) / }).count()).toBe(0);
    await screenshot(page, "environment-view-only-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
  });

  it("deploy: deploys from the page; the log streams in live until the deployment finishes", async () => {
    const { page } = pages.deployer;
    await openEnvironment(page);
    expect(await page.locator(".level").getAttribute("data-level")).toBe("deploy");
    const before = held.length;
    await page.getByRole("button", { name: "Deploy storefront" }).click();
    await until(async () => held.length > before);
    const job = held[before]!;
    const log = page.getByLabel("Deployment log");
    await log.waitFor();
    agent.progress(job.id, ["pulling nginx:1.27"]);
    await expect.poll(() => log.textContent(), { timeout: 10_000 }).toContain("pulling nginx:1.27");
    // Still running: more output arrives in the same page, no reload.
    await page.evaluate("window.mark = 7");
    agent.progress(job.id, ["starting container"]);
    await expect.poll(() => log.textContent(), { timeout: 10_000 }).toBe("pulling nginx:1.27\nstarting container");
    expect(await page.getByRole("button", { name: "Cancel deployment" }).count()).toBe(1);
    await screenshot(page, "deployment-live-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: deployResult() });
    await expect.poll(() => page.locator(".deployment").getAttribute("data-status"), { timeout: 10_000 }).toBe("finished");
    expect(await page.getByRole("button", { name: "Cancel deployment" }).count()).toBe(0);
    // The list is read again when it ends: the application's new status.
    await expect.poll(() => resource(page, app.uuid).locator(".badge").textContent(), { timeout: 10_000 }).toBe("running:healthy");
    expect(await page.evaluate("window.mark")).toBe(7);
  });

  it("deploy: cancel stops a running deployment from the page", async () => {
    const { page } = pages.deployer;
    const before = held.length;
    await page.getByRole("button", { name: "Deploy storefront" }).click();
    await until(async () => held.length > before);
    const dep = page.locator(".deployment");
    await expect.poll(() => dep.getAttribute("data-uuid")).not.toBe(null);
    await page.getByRole("button", { name: "Cancel deployment" }).click();
    await expect.poll(() => dep.getAttribute("data-status"), { timeout: 10_000 }).toBe("cancelled");
    const uuid = (await dep.getAttribute("data-uuid"))!;
    expect((await w.api.get(`/deployments/${uuid}`)).body.status).toBe("cancelled");
  });

  it("the view_only member's page still offers nothing after the deploys, and no page reached another host", async () => {
    const { page } = pages.viewer;
    await page.reload();
    await resource(page, app.uuid).waitFor();
    await page.locator(".level").waitFor();
    expect(await page.getByRole("button", { name: /^(Deploy|Start|Stop|Restart) / }).count()).toBe(0);
    expect(pages.viewer.foreign()).toEqual([]);
    expect(pages.deployer.foreign()).toEqual([]);
  });
});
