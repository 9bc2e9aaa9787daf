/**
 * The admin command line contract, on the built binary: what scripts rely on (stdout carries
 * only the value asked for, exit codes 0/1/2) and that what it creates works over HTTP.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./harness.js";
import { freshPostgresDatabase } from "./support/database.js";
import { freePort } from "../support/ports.js";

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const BIN = join(ROOT, "control-plane/bin/capstan.js");
const TOKEN = /^cap_[0-9A-Za-z]{40}$/;
const FEATURE_NAMES = ["REGISTRY_MANAGEMENT", "CLUSTER_MANAGEMENT", "DNS_PROVIDER_MANAGEMENT", "DNS_MULTI_DOMAIN", "DNS_ENV_BINDINGS", "PROXY_LABEL_OVERRIDES"];

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

let dataDir: string;
let dropDatabase: (() => Promise<void>) | null = null;
let env: NodeJS.ProcessEnv;

/** The test's environment only: no PLATFORM_* or DATABASE_URL leaks in from the caller. */
function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("PLATFORM_") && k !== "DATABASE_URL") out[k] = v;
  return { ...out, PLATFORM_LOG_LEVEL: "silent", PLATFORM_HOST: "127.0.0.1", ...extra };
}

function capstan(args: string[], extraEnv: Record<string, string> = {}): Promise<Result> {
  return new Promise((done) => {
    // A hang guard: a CLI start is 1.6 s on a quiet machine and passed 30 s beside the other suites in CI.
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...env, ...extraEnv }, timeout: 90_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : null) : 0;
      done({ code, stdout, stderr });
    });
  });
}

/** Runs a command that must succeed and returns its stdout. */
async function ok(args: string[]): Promise<string> {
  const r = await capstan(args);
  if (r.code !== 0) throw new Error(`capstan ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/** `capstan serve` as a child process. */
class Served {
  stdout = "";
  stderr = "";
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly url: string;
  readonly api: (token?: string) => ReturnType<typeof client>;

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
  ) {
    this.url = `http://127.0.0.1:${port}`;
    this.api = (token) => client(this.url + "/api/v1", token);
    child.stdout!.on("data", (d) => (this.stdout += String(d)));
    child.stderr!.on("data", (d) => (this.stderr += String(d)));
    this.exited = new Promise((done) => child.once("exit", (code, signal) => done({ code, signal })));
  }

  static async start(): Promise<Served> {
    const port = await freePort();
    const child = spawn(process.execPath, [BIN, "serve"], {
      cwd: ROOT,
      env: { ...env, PLATFORM_PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const served = new Served(child, port);
    running.add(served);
    let exited = false;
    void served.exited.then(() => (exited = true));
    const deadline = Date.now() + 45_000;
    for (;;) {
      if (exited) throw new Error(`capstan serve exited early: ${served.stderr}`);
      try {
        if ((await fetch(served.url + "/healthz")).ok) break;
      } catch {
        /* not listening yet */
      }
      if (Date.now() > deadline) throw new Error(`capstan serve did not become healthy: ${served.stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return served;
  }

  /** SIGTERM and the exit status. */
  async stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    this.child.kill("SIGTERM");
    const result = await this.exited;
    running.delete(this);
    return result;
  }
}
const running = new Set<Served>();

beforeAll(async () => {
  // The binary runs dist/: make sure it is built from the current sources.
  await new Promise<void>((done, fail) =>
    execFile("npx", ["tsc", "-b", "control-plane"], { cwd: ROOT, timeout: 120_000 }, (err, stdout, stderr) =>
      err ? fail(new Error(`npx tsc -b control-plane failed:\n${stdout}${stderr}`)) : done(),
    ),
  );
  dataDir = mkdtempSync(join(tmpdir(), "capstan-cli-"));
  const extra: Record<string, string> = { PLATFORM_DATA_DIR: dataDir };
  if (process.env.CAPSTAN_TEST_PG_URL) {
    const db = await freshPostgresDatabase(process.env.CAPSTAN_TEST_PG_URL);
    dropDatabase = db.drop;
    extra.DATABASE_URL = db.url;
  }
  env = baseEnv(extra);
}, 150_000);

afterAll(async () => {
  for (const s of running) {
    s.child.kill("SIGKILL");
    await s.exited;
  }
  await dropDatabase?.();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

// Each test starts CLI processes (Node and Prisma, seconds each on a loaded CI machine).
describe("capstan CLI", { timeout: 300_000 }, () => {
  // One instance, used in order: first start, admin commands, second start, HTTP checks.
  let rootToken = "";
  let teamId = 0;
  let teamToken = "";
  let server: Served;

  describe("first start", () => {
    it("prints a root token once, which works over HTTP, and stops gracefully on SIGTERM", async () => {
      const first = await Served.start();
      const match = /\s(cap_[0-9A-Za-z]{40})\s/.exec(first.stdout);
      expect(match, first.stdout).not.toBeNull();
      rootToken = match![1]!;
      expect(first.stdout.split(rootToken)).toHaveLength(2); // printed once
      expect(first.stdout).toMatch(/Root Team/);

      const res = await first.api(rootToken).get("/teams/current");
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ name: "Root Team", members_count: 1 });

      expect(await first.stop()).toEqual({ code: 0, signal: null });
      expect(first.stderr).toBe("");
    });
  });

  describe("team and token", () => {
    it("team create prints only the new id", async () => {
      const r = await capstan(["team", "create", "--name", "Team X", "--description", "made by the cli test"]);
      expect(r).toEqual({ code: 0, stdout: expect.stringMatching(/^[1-9][0-9]*\n$/), stderr: "" });
      teamId = Number(r.stdout);
    });

    it("team list shows it", async () => {
      expect(await ok(["team", "list"])).toMatch(new RegExp(`^${teamId}\tTeam X\t0 members$`, "m"));
    });

    it("token create prints only the token", async () => {
      const r = await capstan(["token", "create", "--team", String(teamId), "--name", "ci", "--scopes", "read,write,deploy"]);
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
      expect(r.stdout).toMatch(/^cap_[0-9A-Za-z]{40}\n$/);
      teamToken = r.stdout.trim();
      expect(teamToken).toMatch(TOKEN);
    });
  });

  describe("second start", () => {
    it("prints no root token and serves the CLI-made team to the CLI-made token", async () => {
      server = await Served.start();
      expect(server.stdout).not.toMatch(/cap_/);
      expect(server.stdout).not.toMatch(/Root API token/);

      const res = await server.api(teamToken).get("/teams/current");
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        id: teamId,
        name: "Team X",
        description: "made by the cli test",
        created_at: expect.any(String),
        members_count: 0,
        settings: { allow_member_bind_mounts: false },
        // Issue 15: the team's paid features (none by default).
        features: [],
      });
      // A team token can work in its team.
      const created = await server.api(teamToken).post("/projects", { name: "from-cli-token" });
      expect(created.status).toBe(201);
      // The root token from the first start still works.
      expect((await server.api(rootToken).get("/teams/current")).body.name).toBe("Root Team");
    });
  });

  describe("team settings", () => {
    it("prints the settings; --allow-member-bind-mounts changes them, visible over HTTP", async () => {
      expect(await ok(["team", "settings", "--team", String(teamId)])).toBe("allow_member_bind_mounts\tfalse\n");
      expect(await ok(["team", "settings", "--team", String(teamId), "--allow-member-bind-mounts", "true"])).toBe("allow_member_bind_mounts\ttrue\n");
      expect((await server.api(teamToken).get("/teams/current")).body.settings).toEqual({ allow_member_bind_mounts: true });
      expect(await ok(["team", "settings", "--team", String(teamId), "--allow-member-bind-mounts", "false"])).toBe("allow_member_bind_mounts\tfalse\n");
      expect((await server.api(teamToken).get("/teams/current")).body.settings).toEqual({ allow_member_bind_mounts: false });
    });

    it("an unknown team is an error (exit 1); a value other than true or false a usage error (exit 2), changing nothing", async () => {
      const unknown = await capstan(["team", "settings", "--team", "999999", "--allow-member-bind-mounts", "true"]);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/team 999999 does not exist/);
      const bad = await capstan(["team", "settings", "--team", String(teamId), "--allow-member-bind-mounts", "yes"]);
      expect(bad.code).toBe(2);
      expect(bad.stdout).toBe("");
      expect(bad.stderr).toMatch(/--allow-member-bind-mounts takes true or false/);
      expect(await ok(["team", "settings", "--team", String(teamId)])).toBe("allow_member_bind_mounts\tfalse\n");
    });
  });

  describe("team features (paid features, docs/features.md)", () => {
    it("lists none for a new team, and the root team has every one", async () => {
      expect(await capstan(["team", "features", "--team", String(teamId)])).toEqual({ code: 0, stdout: "", stderr: "" });
      const rootTeam = (await ok(["team", "list"])).split("\n").find((l) => l.includes("\tRoot Team\t"))!.split("\t")[0]!;
      expect(await ok(["team", "features", "--team", rootTeam])).toBe(FEATURE_NAMES.join("\n") + "\n");
      expect((await server.api(rootToken).get("/teams/current")).body.features).toEqual(FEATURE_NAMES);
    });

    it("enables and disables features, prints the result, and the API sees it on the next request", async () => {
      const on = await capstan(["team", "features", "--team", String(teamId), "--enable", "DNS_PROVIDER_MANAGEMENT,REGISTRY_MANAGEMENT"]);
      expect(on).toEqual({ code: 0, stdout: "REGISTRY_MANAGEMENT\nDNS_PROVIDER_MANAGEMENT\n", stderr: "" });
      expect((await server.api(teamToken).get("/teams/current")).body.features).toEqual(["REGISTRY_MANAGEMENT", "DNS_PROVIDER_MANAGEMENT"]);
      const both = await capstan(["team", "features", "--team", String(teamId), "--enable", "DNS_MULTI_DOMAIN", "--disable", "REGISTRY_MANAGEMENT"]);
      expect(both).toEqual({ code: 0, stdout: "DNS_PROVIDER_MANAGEMENT\nDNS_MULTI_DOMAIN\n", stderr: "" });
      expect(await ok(["team", "features", "--team", String(teamId)])).toBe("DNS_PROVIDER_MANAGEMENT\nDNS_MULTI_DOMAIN\n");
      await ok(["team", "features", "--team", String(teamId), "--disable", "DNS_PROVIDER_MANAGEMENT,DNS_MULTI_DOMAIN"]);
      expect((await server.api(teamToken).get("/teams/current")).body.features).toEqual([]);
    });

    it.each([
      ["an unknown feature", ["--enable", "DNS_PROVIDER_MANAGEMENT,TIME_TRAVEL"]],
      ["a lowercase name", ["--disable", "dns_multi_domain"]],
      ["an empty list", ["--enable", ","]],
    ])("refuses %s with exit 2 and changes nothing", async (_name, args) => {
      const r = await capstan(["team", "features", "--team", String(teamId), ...(args as string[])]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/takes a comma list of REGISTRY_MANAGEMENT, CLUSTER_MANAGEMENT/);
      expect(await ok(["team", "features", "--team", String(teamId)])).toBe("");
    });

    it("fails with exit 1 for an unknown team, or a feature both enabled and disabled", async () => {
      const unknown = await capstan(["team", "features", "--team", "999999"]);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/team 999999 does not exist/);
      const both = await capstan(["team", "features", "--team", String(teamId), "--enable", "DNS_ENV_BINDINGS", "--disable", "DNS_ENV_BINDINGS"]);
      expect(both.code).toBe(1);
      expect(both.stderr).toMatch(/cannot both enable and disable DNS_ENV_BINDINGS/);
    });

    it("a new team gets PLATFORM_DEFAULT_TEAM_FEATURES; an unknown name there stops the command with a clear message", async () => {
      const id = (await capstan(["team", "create", "--name", "Defaults"], { PLATFORM_DEFAULT_TEAM_FEATURES: "PROXY_LABEL_OVERRIDES, DNS_PROVIDER_MANAGEMENT" })).stdout.trim();
      expect(await ok(["team", "features", "--team", id])).toBe("DNS_PROVIDER_MANAGEMENT\nPROXY_LABEL_OVERRIDES\n");
      const bad = await capstan(["serve"], { PLATFORM_DEFAULT_TEAM_FEATURES: "DNS_PROVIDER_MANAGEMENT,GOLD" });
      expect(bad.code).toBe(1);
      expect(bad.stdout).toBe("");
      expect(bad.stderr).toMatch(/Invalid configuration/);
      expect(bad.stderr).toMatch(/PLATFORM_DEFAULT_TEAM_FEATURES: unknown feature\(s\) GOLD/);
    });
  });

  describe("users and members", () => {
    let userId = 0;
    let userToken = "";

    it("user create prints only the new id; user list shows it", async () => {
      const r = await capstan(["user", "create", "--name", "Ada", "--email", "Ada@Example.test"]);
      expect(r).toEqual({ code: 0, stdout: expect.stringMatching(/^[1-9][0-9]*\n$/), stderr: "" });
      userId = Number(r.stdout);
      expect(await ok(["user", "list"])).toMatch(new RegExp(`^${userId}\tAda\tada@example.test$`, "m"));
    });

    it("refuses a second user with the same email (exit 1)", async () => {
      const r = await capstan(["user", "create", "--name", "Ada 2", "--email", "ada@example.test"]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/already exists/);
    });

    it("member add puts the user in the team, visible over HTTP", async () => {
      const r = await capstan(["member", "add", "--team", String(teamId), "--user", String(userId), "--role", "member"]);
      expect(r).toEqual({ code: 0, stdout: "", stderr: "" });
      expect(await ok(["member", "list", "--team", String(teamId)])).toBe(`${userId}\tAda\tada@example.test\tmember\n`);
      const res = await server.api(teamToken).get("/teams/current/members");
      expect(res.body).toEqual({ data: [{ id: userId, name: "Ada", email: "ada@example.test", role: "member" }] });
    });

    it("member add again changes the role", async () => {
      await ok(["member", "add", "--team", String(teamId), "--user", String(userId), "--role", "admin"]);
      expect(await ok(["member", "list", "--team", String(teamId)])).toBe(`${userId}\tAda\tada@example.test\tadmin\n`);
    });

    it("a user token works until member remove, then answers 401", async () => {
      userToken = (await ok(["token", "create", "--team", String(teamId), "--user", String(userId), "--name", "ada", "--scopes", "read"])).trim();
      expect(userToken).toMatch(TOKEN);
      expect((await server.api(userToken).get("/teams/current")).status).toBe(200);

      const r = await capstan(["member", "remove", "--team", String(teamId), "--user", String(userId)]);
      expect(r).toEqual({ code: 0, stdout: "", stderr: "" });
      expect(await ok(["member", "list", "--team", String(teamId)])).toBe("");
      const res = await server.api(userToken).get("/teams/current");
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ message: "Unauthenticated." });
    });

    it("member remove of a non-member fails with exit 1", async () => {
      const r = await capstan(["member", "remove", "--team", String(teamId), "--user", String(userId)]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/not a member/);
    });
  });

  describe("tokens", () => {
    it("token list shows names, scopes and status but never a secret", async () => {
      const out = await ok(["token", "list", "--team", String(teamId)]);
      const lines = out.trim().split("\n");
      expect(lines.length).toBe(2);
      expect(lines[0]).toMatch(/^\d+\tteam \d+\tci\tread,write,deploy\tuser -\tlast used \S+\tactive$/);
      expect(lines[1]).toMatch(/\tada\tread\tuser \d+\t.*\trevoked$/);
      for (const secret of [teamToken, rootToken]) {
        expect(out).not.toContain(secret);
        expect(out).not.toContain(secret.slice(4));
        expect(out).not.toContain(createHash("sha256").update(secret).digest("hex"));
      }
      const everything = await ok(["token", "list"]);
      expect(everything).toMatch(/\troot\t/);
      expect(everything).not.toContain(rootToken);
    });

    it("token revoke ends the token at once (401)", async () => {
      const id = (await ok(["token", "list", "--team", String(teamId)])).split("\n").find((l) => l.includes("\tci\t"))!.split("\t")[0]!;
      expect((await server.api(teamToken).get("/teams/current")).status).toBe(200);
      const r = await capstan(["token", "revoke", "--id", id]);
      expect(r).toEqual({ code: 0, stdout: "", stderr: "" });
      const res = await server.api(teamToken).get("/teams/current");
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ message: "Unauthenticated." });
      expect(await ok(["token", "list", "--team", String(teamId)])).toMatch(new RegExp(`^${id}\t.*\trevoked$`, "m"));
    });

    it("token revoke of an unknown id fails with exit 1", async () => {
      const r = await capstan(["token", "revoke", "--id", "999999"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/token 999999 does not exist/);
    });

    it("an expiring token works now", async () => {
      const token = (await ok(["token", "create", "--team", String(teamId), "--name", "short", "--scopes", "read", "--expires-in-days", "1"])).trim();
      expect((await server.api(token).get("/teams/current")).status).toBe(200);
    });
  });

  describe("usage errors: exit 2, usage on stderr, nothing on stdout", () => {
    let teamsBeforeUsageErrors = "";
    let tokensBeforeUsageErrors = "";
    beforeAll(async () => {
      teamsBeforeUsageErrors = await ok(["team", "list"]);
      tokensBeforeUsageErrors = await ok(["token", "list"]);
    });

    it.each([
      ["misspelled flag", ["team", "create", "--nmae", "X"]],
      ["missing required flag", ["team", "create"]],
      ["empty required flag", ["team", "create", "--name", ""]],
      ["flag without value", ["team", "create", "--name"]],
      ["stray positional", ["team", "create", "--name", "X", "extra"]],
      ["unknown command", ["frobnicate"]],
      ["unknown action", ["team", "explode"]],
      ["non-integer team id", ["token", "create", "--team", "abc", "--name", "n", "--scopes", "read"]],
      ["zero team id", ["member", "list", "--team", "0"]],
      ["unknown scope", ["token", "create", "--team", "1", "--name", "n", "--scopes", "read,admin"]],
      ["empty scopes", ["token", "create", "--team", "1", "--name", "n", "--scopes", ","]],
      ["unknown role", ["member", "add", "--team", "1", "--user", "1", "--role", "god"]],
      ["bad expiry", ["token", "create", "--team", "1", "--name", "n", "--scopes", "read", "--expires-in-days", "-3"]],
      ["unknown feature", ["team", "features", "--team", "1", "--enable", "NOPE"]],
      ["no command at all", []],
    ])("%s", async (_name, args) => {
      const r = await capstan(args);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/usage: capstan <command>/);
    });

    it("changed nothing", async () => {
      expect(await ok(["team", "list"])).toBe(teamsBeforeUsageErrors);
      expect(await ok(["token", "list"])).toBe(tokensBeforeUsageErrors);
    });

    it("help prints usage on stdout with exit 0", async () => {
      const r = await capstan(["help"]);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/usage: capstan <command>/);
      expect(r.stderr).toBe("");
    });
  });

  describe("errors: exit 1 with a clear message", () => {
    it.each([
      ["token create", ["token", "create", "--team", "999999", "--name", "n", "--scopes", "read"], /team 999999 does not exist/],
      ["member add", ["member", "add", "--team", "999999", "--user", "1", "--role", "member"], /team 999999 does not exist/],
    ])("unknown team in %s", async (_name, args, message) => {
      const r = await capstan(args as string[]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/^capstan: /);
      expect(r.stderr).toMatch(message as RegExp);
      expect(r.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
    });

    it("unknown user in member add", async () => {
      const r = await capstan(["member", "add", "--team", String(teamId), "--user", "999999", "--role", "member"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/user 999999 does not exist/);
    });

    it("a token for a user outside the team", async () => {
      const other = Number(await ok(["user", "create", "--name", "Outsider", "--email", "outsider@example.test"]));
      const r = await capstan(["token", "create", "--team", String(teamId), "--user", String(other), "--name", "n", "--scopes", "read"]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/not a member/);
    });
  });

  describe("configuration errors", () => {
    it.each(["notaport", "70000", "-1"])("serve refuses PLATFORM_PORT=%s with a clear message", async (port) => {
      const r = await capstan(["serve"], { PLATFORM_PORT: port });
      expect(r.code).not.toBe(0);
      expect(r.code).not.toBeNull();
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/Invalid configuration/);
      expect(r.stderr).toMatch(/PLATFORM_PORT/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    });

    it("admin commands refuse a bad DATABASE_URL the same way", async () => {
      const r = await capstan(["team", "list"], { DATABASE_URL: "mysql://localhost/x" });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/Invalid configuration/);
      expect(r.stderr).toMatch(/DATABASE_URL/);
    });
  });

  // ---- dashboard sign-in (area: dashboard, issue 22) ----
  describe("user password and user sign-in-link (dashboard sign-in)", () => {
    let userId = 0;
    const email = "grace@example.test";

    /** The CLI with standard input. */
    const withInput = (args: string[], input: string): Promise<Result> =>
      new Promise((done) => {
        const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...env, PLATFORM_PUBLIC_URL: server.url }, stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d) => (stdout += String(d)));
        child.stderr.on("data", (d) => (stderr += String(d)));
        child.once("exit", (code) => done({ code, stdout, stderr }));
        child.stdin.end(input);
      });
    const signIn = (body: unknown) => fetch(`${server.url}/session/sign-in`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });

    it("user password reads the password from standard input; the dashboard then signs the user in", async () => {
      userId = Number((await ok(["user", "create", "--name", "Grace", "--email", email])).trim());
      await ok(["member", "add", "--team", String(teamId), "--user", String(userId), "--role", "viewer"]);
      const r = await withInput(["user", "password", "--user", String(userId)], "a long enough password\nignored second line\n");
      expect(r).toEqual({ code: 0, stdout: "", stderr: "password set\n" });
      const res = await signIn({ email, password: "a long enough password" });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { team: { id: number; role: string } }).team).toMatchObject({ id: teamId, role: "viewer" });
    });

    it("refuses a short password (exit 1), no password (exit 2) and an unknown user (exit 1); the old password still works", async () => {
      const short = await withInput(["user", "password", "--user", String(userId)], "short\n");
      expect(short.code).toBe(1);
      expect(short.stderr).toMatch(/at least 10 characters/);
      const none = await withInput(["user", "password", "--user", String(userId)], "");
      expect(none.code).toBe(2);
      expect(none.stderr).toMatch(/reads the password from standard input/);
      const unknown = await withInput(["user", "password", "--user", "999999"], "a long enough password\n");
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/user does not exist/);
      expect((await signIn({ email, password: "a long enough password" })).status).toBe(200);
    });

    it("user sign-in-link prints a one-time link to the dashboard that signs the user in once", async () => {
      const r = await withInput(["user", "sign-in-link", "--user", String(userId)], "");
      expect(r.code).toBe(0);
      const m = new RegExp(`^${server.url}/#link=([A-Za-z0-9_-]{43})\n$`).exec(r.stdout);
      expect(m, r.stdout).not.toBeNull();
      const use = () => fetch(`${server.url}/session/link`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ link: m![1] }) });
      expect((await use()).status).toBe(200);
      expect((await use()).status).toBe(401);
    });
  });

  describe("shutdown", () => {
    it("the server exits 0 on SIGTERM (graceful shutdown)", async () => {
      // An open keep-alive connection must not hold the shutdown up.
      expect((await server.api(rootToken).get("/teams/current")).status).toBe(200);
      expect(await server.stop()).toEqual({ code: 0, signal: null });
      expect(server.stderr).toBe("");
    });
  });
});
