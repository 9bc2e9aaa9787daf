import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { startTestInstance, type TestInstance, type TeamFixture } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { newServer, ok } from "../api/support/applications.js";
import { connectAgent, type ScriptedAgent } from "../api/support/fake-agent.js";
import { Sessions } from "../../control-plane/src/services/sessions.js";
import { accessibilityProblems, launch, recordingPage, requireBuiltDashboard, screenshot, signInAs } from "./support.js";

/**
 * The Fleet page's empty state (issue 22: "empty states that say what to do next"): a team with
 * no servers sees how to join one; an admin adds a server in the page and gets its join command
 * (POST /servers), whose agent token really connects; a server never seen gets a new join
 * command on its card (POST /servers/{uuid}/agent-token); a member is told to ask an admin.
 */
let t: TestInstance;
let team: TeamFixture;
let emptyTeam: TeamFixture;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let foreign: () => string[];
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];
const PASSWORD = "a password for the browser";
let adminEmail: string;
let memberEmail: string;

const signIn = (p: Page, email: string) => signInAs(p, t.url, email, PASSWORD);

/** The agent token and control plane address in a join command (docker run ... -e CAPSTAN_URL='...' -e CAPSTAN_AGENT_TOKEN='...'). */
function parseJoin(command: string): { url: string; token: string } {
  const url = /CAPSTAN_URL='([^']+)'/.exec(command)?.[1];
  const token = /CAPSTAN_AGENT_TOKEN='([^']+)'/.exec(command)?.[1];
  expect(command).toMatch(/^docker run -d --name capstan-agent /);
  if (!url || !token) throw new Error(`not a join command: ${command}`);
  return { url, token };
}

async function joinWith(command: string): Promise<ScriptedAgent> {
  // The command names PLATFORM_PUBLIC_URL (the harness leaves the default); the agent dials the test's control plane.
  const { url, token } = parseJoin(command);
  expect(url).toMatch(/^https?:\/\//);
  const agent = await connectAgent(t.url, token);
  agents.push(agent);
  await agent.hello();
  return agent;
}

beforeAll(async () => {
  requireBuiltDashboard();
  t = await startTestInstance();
  team = await t.newTeam();
  const sessions = new Sessions(t.instance.database.prisma);
  adminEmail = "admin-empty@example.test";
  memberEmail = "member-empty@example.test";
  const admin = await t.instance.admin.createUser("Admin", adminEmail);
  await t.instance.admin.setMember(team.teamId, admin, "admin");
  await sessions.setPassword(admin, PASSWORD);
  // The member's only team has no servers.
  emptyTeam = await t.newTeam();
  const member = await t.instance.admin.createUser("Member", memberEmail);
  await t.instance.admin.setMember(emptyTeam.teamId, member, "member");
  await sessions.setPassword(member, PASSWORD);
  browser = await launch();
  context = await browser.newContext({ viewport: { width: 360, height: 780 } });
  ({ page, foreign } = await recordingPage(context, t.url));
}, 120_000);

afterAll(async () => {
  await browser?.close();
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

describe("the empty Fleet page", () => {
  it("a team without SSH keys is told what to add first", async () => {
    await signIn(page, adminEmail);
    await page.getByRole("heading", { name: "No servers yet" }).waitFor();
    await page.getByText("POST /api/v1/security/keys").waitFor();
    expect(await page.getByRole("button", { name: "Add server and show join command" }).count()).toBe(0);
  });

  it("says how to join a server; adding one shows its join command, which connects its agent", async () => {
    const key = await keys.generate("ed25519");
    await ok(team.api.post("/security/keys", { name: "ops key", private_key: key.privateKey }), "key");
    await page.reload();
    await page.getByRole("heading", { name: "No servers yet" }).waitFor();
    await page.getByRole("form", { name: "Add a server" }).waitFor();
    await screenshot(page, "fleet-empty-360");
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);

    // Bad input: the API's answer, on the page; nothing is created.
    await page.getByLabel("Name").fill("edge-1");
    await page.getByLabel("Address").fill("not an address!");
    await page.getByRole("button", { name: "Add server and show join command" }).click();
    await page.getByRole("alert").waitFor();
    expect((await team.api.get("/servers")).body.data).toEqual([]);

    await page.getByLabel("Address").fill("10.0.0.9");
    await page.getByRole("button", { name: "Add server and show join command" }).click();
    const command = await page.getByLabel("Join command").inputValue();
    const servers = (await team.api.get("/servers")).body.data as { uuid: string; name: string; status: string }[];
    expect(servers.map((s) => [s.name, s.status])).toEqual([["edge-1", "pending"]]);
    const card = page.locator(`li.server[data-uuid="${servers[0]!.uuid}"]`);
    await expect.poll(() => card.locator(".server-head .badge").textContent()).toBe("never seen");
    await screenshot(page, "fleet-join-command-360");
    expect(await accessibilityProblems(page)).toEqual([]);

    await joinWith(command);
    await expect.poll(() => card.locator(".server-head .badge").textContent(), { timeout: 10_000 }).toBe("connected");
    await page.getByRole("button", { name: "Done" }).click();
    expect(await page.getByLabel("Join command").count()).toBe(0);
    // A connected server offers no join command (a new token would drop its agent).
    expect(await card.getByRole("button", { name: "Show join command" }).count()).toBe(0);
  });

  it("a server never seen gets a new join command on its card; the old token stops working", async () => {
    const s = await newServer(team.api, (await team.api.get("/security/keys")).body.data[0].uuid, "late");
    await page.reload();
    const card = page.locator(`li.server[data-uuid="${s.uuid}"]`);
    await card.getByRole("button", { name: "Show join command" }).click();
    const command = await card.getByLabel("Join command").inputValue();
    expect(parseJoin(command).token).not.toBe(s.agentToken);
    await expect(connectAgent(t.url, s.agentToken)).rejects.toThrow();
    await joinWith(command);
    await expect.poll(() => card.locator(".server-head .badge").textContent(), { timeout: 10_000 }).toBe("connected");
    expect(foreign()).toEqual([]);
  });

  it("a member (no right to add servers) is told to ask an owner or admin", async () => {
    const other = await browser.newContext({ viewport: { width: 360, height: 780 } });
    const p = await other.newPage();
    await signIn(p, memberEmail);
    await p.getByRole("heading", { name: "No servers yet" }).waitFor();
    await p.getByText("Ask an owner or admin of the team to add a server.").waitFor();
    expect(await p.getByRole("form", { name: "Add a server" }).count()).toBe(0);
    expect(await accessibilityProblems(p)).toEqual([]);
    await other.close();
  });
});
