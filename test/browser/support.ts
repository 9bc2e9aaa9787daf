import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));

/** Where the browser tests write their screenshots (README: test/browser/screenshots/). */
export const SCREENSHOTS = join(ROOT, "test/browser/screenshots");

/** Debian's Chromium (test/services/chromium.sh installs it); playwright-core only drives it. */
export const CHROMIUM = process.env.CAPSTAN_CHROMIUM ?? "/usr/bin/chromium";

/** Builds the dashboard when dist/ is missing (scripts/test.sh builds everything first anyway). */
export function ensureDashboardBuilt(): void {
  if (existsSync(join(ROOT, "dashboard/dist/index.html"))) return;
  execFileSync("npm", ["run", "build", "-w", "@capstan/dashboard"], { cwd: ROOT, stdio: "pipe", timeout: 120_000 });
}

/** The built dashboard and Chromium, or a clear failure. */
export function requireBuiltDashboard(): void {
  ensureDashboardBuilt();
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: run \`bash test/services/chromium.sh\` (scripts/test.sh does)`);
}

export async function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // As root in a container: no sandbox. Nothing in the background talks to Google's hosts.
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/**
 * A page that records every request it makes: the dashboard must reach no host but the
 * control plane (`foreign()` lists the others).
 */
export async function recordingPage(context: BrowserContext, origin: string): Promise<{ page: Page; requests: string[]; foreign: () => string[] }> {
  const page = await context.newPage();
  const requests: string[] = [];
  page.on("request", (r) => requests.push(r.url()));
  page.on("websocket", (ws) => requests.push(ws.url()));
  const host = new URL(origin).host;
  const foreign = () => requests.filter((u) => !u.startsWith("data:") && new URL(u).host !== host);
  return { page, requests, foreign };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

let axeSource: string | undefined;

/**
 * The serious and critical accessibility violations axe-core finds on the page as it is now
 * (WCAG 2 A and AA rules), as "rule: element" lines. axe runs through the DevTools protocol, so
 * the page's CSP (own origin only) stays as it is.
 */
export async function accessibilityProblems(page: Page): Promise<string[]> {
  axeSource ??= readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
  if (!(await page.evaluate<boolean>("typeof window.axe === 'object'"))) await page.evaluate<unknown>(axeSource);
  return page.evaluate<string[]>(`axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } })
    .then((r) => r.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .flatMap((v) => v.nodes.map((n) => v.id + ": " + n.target.join(" "))))`);
}

/** Signs in on the dashboard's sign-in page and waits for the Fleet page. */
export async function signInAs(page: Page, origin: string, email: string, password: string): Promise<void> {
  await page.goto(origin + "/");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Fleet" }).waitFor({ timeout: 10_000 });
}
