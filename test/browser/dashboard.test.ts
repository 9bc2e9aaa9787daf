import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { startTestInstance, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { appWorld, connectServerAgent, newServer, type AppWorld } from "../api/support/applications.js";
import { connectAgent, type ScriptedAgent } from "../api/support/fake-agent.js";
import { Sessions } from "../../control-plane/src/services/sessions.js";
import { accessibilityProblems, launch, recordingPage, requireBuiltDashboard, screenshot } from "./support.js";

/**
 * The dashboard in a real browser (issue 22): Debian's Chromium driven by playwright-core
 * against a real control plane (the API harness) with scripted agents. Sign in, the fleet
 * with each agent's connectivity changing live, sign out, and a page of another origin that
 * cannot use the session.
 */
let t: TestInstance;
let w: AppWorld;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let foreign: () => string[];
let requests: string[];
let dbServer: { uuid: string; name: string; agentToken: string };
let otherTeam: AppWorld;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];
const EMAIL = "operator@example.test";
const PASSWORD = "a password for the browser";

const card = (uuid: string) => page.locator(`li.server[data-uuid="${uuid}"]`);
const badge = (uuid: string) => card(uuid).locator(".server-head .badge");

async function signIn(): Promise<void> {
  await page.goto(t.url + "/");
  await page.getByLabel("Email").fill(EMAIL);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Fleet" }).waitFor({ timeout: 10_000 });
}

beforeAll(async () => {
  requireBuiltDashboard();
  t = await startTestInstance();
  w = await appWorld(t, keys);
  dbServer = await newServer(w.api, w.keyUuid, "db");
  const userId = await t.instance.admin.createUser("Operator", EMAIL);
  await t.instance.admin.setMember(w.team.teamId, userId, "admin");
  // A second team of the user's, with a server of its own (team switching).
  otherTeam = await appWorld(t, keys);
  await t.instance.admin.setMember(otherTeam.team.teamId, userId, "viewer");
  await new Sessions(t.instance.database.prisma).setPassword(userId, PASSWORD);
  browser = await launch();
  // 360 px wide: the size the issue asks the page to be usable at.
  context = await browser.newContext({ viewport: { width: 360, height: 780 } });
  ({ page, foreign, requests } = await recordingPage(context, t.url));
}, 120_000);

afterAll(async () => {
  await browser?.close();
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

describe("dashboard in Chromium", () => {
  it("the sign-in page; a wrong password is refused on the page", async () => {
    await page.goto(t.url + "/");
    await page.getByRole("heading", { name: "Sign in to Capstan" }).waitFor();
    await screenshot(page, "sign-in");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
    await page.getByLabel("Email").fill(EMAIL);
    await page.getByLabel("Password").fill("not the password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toBe("Wrong email or password.");
  });

  it("the accessibility check sees violations (so its empty lists above mean something)", async () => {
    const probe = await context.newPage();
    await probe.setContent('<!doctype html><html lang="en"><title>probe</title><body><main><img src="data:,"><input type="text"></main></body></html>');
    const problems = await accessibilityProblems(probe);
    await probe.close();
    expect(problems.some((p) => p.startsWith("image-alt"))).toBe(true);
    expect(problems.some((p) => p.startsWith("label"))).toBe(true);
  });

  it("signs in and lists every server of the team with its connectivity", async () => {
    await signIn();
    await card(w.server.uuid).waitFor();
    expect(await card(w.server.uuid).locator("h2").textContent()).toBe("web");
    expect(await badge(w.server.uuid).textContent()).toBe("never seen");
    expect(await badge(dbServer.uuid).textContent()).toBe("never seen");
    await expect.poll(() => card(w.server.uuid).locator(".resources").textContent()).toBe("0");
    await page.locator(".live.on").waitFor();
  });

  it("a server's agent connecting and dropping shows live, without a reload", async () => {
    // A mark on the window: a reload would lose it.
    await page.evaluate("window.mark = 42");
    const agent = await connectServerAgent(t, w);
    agents.push(agent);
    await expect.poll(() => badge(w.server.uuid).textContent(), { timeout: 10_000 }).toBe("connected");
    // The agent's versions arrive with the status; the engine's come from the server's facts.
    expect(await card(w.server.uuid).textContent()).toContain("test-0.0.1");
    await expect.poll(() => card(w.server.uuid).textContent()).toContain("20.10.24");
    await screenshot(page, "fleet-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    const started = Date.now();
    agent.close();
    await expect.poll(() => badge(w.server.uuid).textContent(), { timeout: 10_000 }).toBe("unreachable");
    expect(Date.now() - started).toBeLessThan(10_000);
    const again = await connectServerAgentAgain();
    await expect.poll(() => badge(w.server.uuid).textContent(), { timeout: 10_000 }).toBe("connected");
    again.close();
    await expect.poll(() => badge(w.server.uuid).textContent(), { timeout: 10_000 }).toBe("unreachable");
    expect(await badge(dbServer.uuid).textContent()).toBe("never seen");
    expect(await page.evaluate("window.mark")).toBe(42);
  });

  it("a server's connectivity history shows when its agent dropped and for how long (stop the agent, start it)", async () => {
    const history = card(w.server.uuid).locator("ol.history li");
    await card(w.server.uuid).getByRole("button", { name: "History" }).click();
    // The test above: connected, dropped, connected, dropped (now).
    await expect.poll(() => history.evaluateAll((els) => els.map((e) => e.getAttribute("data-state")))).toEqual(["unreachable", "reachable", "unreachable", "reachable"]);
    const stopped = Date.now();
    await expect.poll(() => Date.now() - stopped > 1500, { timeout: 5000 }).toBe(true);
    const again = await connectServerAgentAgain();
    // Read again when the server's connectivity changes: the drop that just ended has its length.
    await expect.poll(() => history.first().getAttribute("data-state"), { timeout: 10_000 }).toBe("reachable");
    expect(await history.first().textContent()).toContain("so far");
    const drop = history.nth(1);
    expect(await drop.getAttribute("data-state")).toBe("unreachable");
    const api = (await w.api.get(`/servers/${w.server.uuid}/connectivity?limit=2`)).body as { data: { state: string; duration_seconds: number }[] };
    expect(api.data[1]!.duration_seconds).toBeGreaterThanOrEqual(1);
    expect(await drop.locator(".duration").textContent()).toBe(`${api.data[1]!.duration_seconds} s`);
    expect(await drop.textContent()).toMatch(/^unreachable from .+ for \d+ s$/);
    await screenshot(page, "fleet-history-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
    again.close();
    await expect.poll(() => badge(w.server.uuid).textContent(), { timeout: 10_000 }).toBe("unreachable");
    await card(w.server.uuid).getByRole("button", { name: "Hide history" }).click();
  });

  it("fits 360 px: nothing wider than the viewport", async () => {
    // (Expressions as strings: the test's own TypeScript has no DOM types.)
    const width = await page.evaluate<number>("document.documentElement.scrollWidth");
    expect(width).toBeLessThanOrEqual(360);
  });

  it("signed in, a reload paints the fleet's servers quickly (issue: under 1 s on loopback)", async () => {
    const sent = requests.length;
    await page.reload();
    await card(w.server.uuid).waitFor();
    // From the navigation's start to the first server card, by the page's own clock.
    const ms = await page.evaluate<number>("performance.now()");
    console.log(`fleet: servers shown ${Math.round(ms)} ms after navigation start`);
    // 1 s is the target; the bound leaves room for a loaded 2-core CI machine.
    expect(ms).toBeLessThan(2000);
    // One read for the whole fleet (GET /servers carries versions, last seen, resource counts):
    // no request per server, and the counts are there with the cards.
    expect(await card(w.server.uuid).locator(".resources").textContent()).toBe("0");
    const api = requests.slice(sent).map((u) => new URL(u).pathname).filter((p) => p.startsWith("/api/v1/servers"));
    expect(api.filter((p) => p !== "/api/v1/servers")).toEqual([]);
    expect(api.length).toBeGreaterThanOrEqual(1);
  });

  it("made no request to any host but the control plane", () => {
    expect(foreign()).toEqual([]);
  });

  it("a page of another origin cannot use the session: no token minted, the session not ended", async () => {
    const evil = await evilSite();
    try {
      const tokensBefore = await t.instance.database.prisma.apiToken.count({ where: { name: "dashboard session" } });
      const other = await context.newPage();
      await other.goto(evil.url);
      // A same-site origin (same host, another port) receives the SameSite cookie: the origin checks refuse it.
      const outcome = await other.evaluate(async (target) => {
        const tries: string[] = [];
        try {
          const r = await fetch(`${target}/session/token`, { method: "POST", credentials: "include", headers: { "Content-Type": "application/json" }, body: "{}" });
          tries.push(`json ${r.status}`);
        } catch {
          tries.push("json blocked");
        }
        for (const path of ["/session/token", "/session/sign-out"]) {
          const r = await fetch(`${target}${path}`, { method: "POST", mode: "no-cors", credentials: "include", body: "{}" });
          tries.push(`${path} ${r.type}`);
        }
        return tries;
      }, t.url);
      expect(outcome).toEqual(["json blocked", "/session/token opaque", "/session/sign-out opaque"]);
      // A plain form posting to sign-out (a top-level navigation carries SameSite=Strict cookies only from the same site).
      await other.evaluate(`(() => {
        const f = document.createElement("form");
        f.method = "POST";
        f.action = ${JSON.stringify(t.url + "/session/sign-out")};
        f.enctype = "text/plain";
        document.body.append(f);
        f.submit();
      })()`);
      await other.waitForLoadState();
      expect(await other.textContent("body")).toMatch(/refused|Content-Type/);
      await other.close();
      expect(await t.instance.database.prisma.apiToken.count({ where: { name: "dashboard session" } })).toBe(tokensBefore);
      // Still signed in: the fleet page keeps working after a reload.
      await page.reload();
      await page.getByRole("heading", { name: "Fleet" }).waitFor();
    } finally {
      await new Promise((r) => evil.server.close(r));
    }
  });

  it("API Tokens: create with a name and scopes, the value shown once works with exactly those scopes; revoke: 401", async () => {
    await page.getByRole("link", { name: "API Tokens" }).click();
    await page.getByRole("heading", { name: "API Tokens" }).waitFor();
    await page.getByText("No API tokens yet").waitFor();
    await page.getByLabel("Name").fill("ci reader");
    // read is chosen by default; deploy added, write left out.
    await page.getByRole("checkbox", { name: /^deploy/ }).check();
    await page.getByRole("button", { name: "Create token" }).click();
    const value = await page.getByLabel("Token value").inputValue();
    expect(value).toMatch(/^cap_[0-9A-Za-z]{40}$/);
    await screenshot(page, "tokens-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
    const api = t.api(value);
    expect((await api.get("/teams/current")).body.id).toBe(w.team.teamId);
    expect((await api.post("/projects", { name: "not allowed" })).status).toBe(403); // no write
    const row = await t.instance.database.prisma.apiToken.findFirstOrThrow({ where: { name: "ci reader" } });
    expect(row.scopes).toBe("read,deploy");
    const item = page.locator("li.token", { hasText: "ci reader" });
    expect(await item.locator(".scopes").textContent()).toBe("read, deploy");
    // Shown once: after a reload the page has no trace of it.
    await page.reload();
    await item.waitFor();
    expect(await page.content()).not.toContain(value);
    await page.getByRole("button", { name: "Revoke ci reader" }).click();
    await page.getByText("No API tokens yet").waitFor();
    expect((await api.get("/teams/current")).status).toBe(401);
    expect(foreign()).toEqual([]);
    await page.getByRole("link", { name: "Fleet" }).click();
    await page.getByRole("heading", { name: "Fleet" }).waitFor();
  });

  it("switches team: the other team's servers replace this team's, and back", async () => {
    const teams = page.getByRole("combobox", { name: "Team" });
    await teams.selectOption(String(otherTeam.team.teamId));
    await card(otherTeam.server.uuid).waitFor();
    expect(await card(w.server.uuid).count()).toBe(0);
    expect(await badge(otherTeam.server.uuid).textContent()).toBe("never seen");
    await teams.selectOption(String(w.team.teamId));
    await card(w.server.uuid).waitFor();
    expect(await card(otherTeam.server.uuid).count()).toBe(0);
  });

  it("signs out: back to the sign-in page, the session and its tokens are gone", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in to Capstan" }).waitFor();
    const status = await page.evaluate(async () => (await fetch("/session")).status);
    expect(status).toBe(401);
    const live = await t.instance.database.prisma.apiToken.count({ where: { name: "dashboard session", revokedAt: null, expiresAt: { gt: new Date() } } });
    expect(live).toBe(0);
    await page.reload();
    await page.getByRole("heading", { name: "Sign in to Capstan" }).waitFor();
  });
});

/** The scripted agent of the world's server, connected again after it dropped. */
async function connectServerAgentAgain(): Promise<ScriptedAgent> {
  const agent = await connectAgent(t.url, w.server.agentToken);
  agents.push(agent);
  await agent.hello();
  return agent;
}

/** A page on another origin of the same host (another port): what a hostile site would serve. */
async function evilSite(): Promise<{ server: Server; url: string }> {
  const server = createServer((_req, res) => {
    res.setHeader("Content-Type", "text/html");
    res.end("<!doctype html><title>elsewhere</title><body></body>");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return { server, url: `http://127.0.0.1:${port}/` };
}
