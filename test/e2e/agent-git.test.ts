import { createHash, randomBytes } from "node:crypto";
import net from "node:net";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeploySource } from "@capstan/shared";
import { fetchGit, fetchGitUnvalidated, GitError, type GitSource } from "../../agent/src/source/git.js";
import {
  GitRepos,
  type FixtureRepo,
  type GitServer,
  type HttpGitServer,
  sshKeyPair,
  startGitDaemon,
  startHttpGit,
  startSshGit,
  type KeyPair,
} from "../support/git-server.js";

/**
 * fetchGit against real git servers on loopback: git daemon (git://), smart HTTP through
 * git http-backend (public, and private with basic auth), and sshd forcing git-shell.
 */
const RUN = randomBytes(4).toString("hex");
const TOKEN = `ghs_${randomBytes(18).toString("hex")}`;
const MARKER = `/tmp/capstan-inject-${RUN}`;

let repos: GitRepos;
let app: FixtureRepo;
let daemon: GitServer;
let web: HttpGitServer;
let privateWeb: HttpGitServer;
let sshd: GitServer;
let deployKey: KeyPair;
let work: string;
const lines: string[] = [];

const ctx = (signal: AbortSignal = AbortSignal.timeout(120_000)) => ({ signal, progress: (l: string) => void lines.push(l) });
let n = 0;
const dest = () => join(work, `checkout-${++n}`);
const src = (url: string, over: Partial<GitSource> = {}): GitSource => ({ kind: "git", url, branch: "main", commit: null, auth: { kind: "none" }, ...over });
const read = (dir: string, file: string) => readFile(join(dir, file), "utf8");
const snapshot = async (path: string) => (existsSync(path) ? createHash("sha256").update(await readFile(path)).digest("hex") : "absent");
const gitTemps = async () => (await readdir(tmpdir())).filter((f) => f.startsWith("capstan-git-") && !f.startsWith("capstan-git-repos-") && !f.startsWith("capstan-git-work-"));

/** Command lines of live (not zombie) processes. */
async function processes(): Promise<string[]> {
  const out: string[] = [];
  for (const pid of (await readdir("/proc")).filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, "utf8");
      if (/\) Z /.test(stat)) continue;
      out.push((await readFile(`/proc/${pid}/cmdline`, "utf8")).replace(/\0/g, " "));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function failure(p: Promise<unknown>): Promise<GitError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, "expected the fetch to fail").toBeInstanceOf(GitError);
  return err as GitError;
}

beforeAll(async () => {
  repos = await GitRepos.create();
  work = await mkdtemp(join(tmpdir(), "capstan-e2e-git-"));
  app = await repos.repo("app.git", { "index.html": "v1\n", "package.json": '{"name":"app"}\n' }, { message: "first version" });
  await repos.commit(app, { "index.html": "v2\n" }, "second version");
  await repos.commit(app, { "index.html": "v3\n" }, "third version");
  await repos.commit(app, { "feature.txt": "on a branch\n" }, "feature work", "feature/x");
  await repos.repo("private.git", { "secret.txt": "private v1\n" }, { message: "private repo" });
  daemon = await startGitDaemon(repos.base);
  web = await startHttpGit(repos.base);
  privateWeb = await startHttpGit(repos.base, { auth: { username: "x-access-token", token: TOKEN } });
  deployKey = await sshKeyPair("capstan-deploy-key");
  sshd = await startSshGit(repos.base, deployKey.publicKey);
});

afterAll(async () => {
  await Promise.all([daemon?.stop(), web?.stop(), privateWeb?.stop(), sshd?.stop()]);
  await repos?.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
  await rm(MARKER, { force: true });
});

describe("public clones", () => {
  it("clones the branch head over git://, shallow", async () => {
    const d = dest();
    const r = await fetchGit(src(daemon.url("app.git")), d, ctx());
    expect(r).toEqual({ commit: app.commits[2], message: "third version" });
    expect(await read(d, "index.html")).toBe("v3\n");
    expect(await read(join(d, ".git"), "shallow")).toContain(app.commits[2]);
  });

  it("clones over smart HTTP, and another branch", async () => {
    const d = dest();
    expect(await fetchGit(src(web.url("app.git")), d, ctx())).toEqual({ commit: app.commits[2], message: "third version" });
    const f = dest();
    expect(await fetchGit(src(web.url("app.git"), { branch: "feature/x" }), f, ctx())).toEqual({ commit: app.commits[3], message: "feature work" });
    expect(await read(f, "feature.txt")).toBe("on a branch\n");
  });

  it("checks out an exact commit by full id", async () => {
    for (const url of [daemon.url("app.git"), web.url("app.git")]) {
      const d = dest();
      expect(await fetchGit(src(url, { commit: app.commits[0]! }), d, ctx())).toEqual({ commit: app.commits[0], message: "first version" });
      expect(await read(d, "index.html")).toBe("v1\n");
    }
  });

  it("finds an abbreviated commit id by fetching the history", async () => {
    const d = dest();
    const short = app.commits[1]!.slice(0, 9).toUpperCase();
    expect(await fetchGit(src(daemon.url("app.git"), { commit: short }), d, ctx())).toEqual({ commit: app.commits[1], message: "second version" });
    expect(await read(d, "index.html")).toBe("v2\n");
  });

  it("finds a commit that is only on another branch", async () => {
    const d = dest();
    expect(await fetchGit(src(web.url("app.git"), { commit: app.commits[3]!.slice(0, 12) }), d, ctx())).toMatchObject({ commit: app.commits[3] });
  });

  it("reports progress lines", () => {
    expect(lines.some((l) => /fetching branch main from git:\/\/127\.0\.0\.1/.test(l))).toBe(true);
    expect(lines.some((l) => /^checked out [0-9a-f]{12} \(third version\)$/.test(l))).toBe(true);
  });

  it("fails with clear reasons: repository, branch, commit", async () => {
    for (const url of [daemon.url("missing.git"), web.url("missing.git")]) {
      const e = await failure(fetchGit(src(url), dest(), ctx()));
      expect(e.reason).toBe("not_found");
      expect(e.message).toMatch(/^repository not found: /);
    }
    const b = await failure(fetchGit(src(daemon.url("app.git"), { branch: "nope" }), dest(), ctx()));
    expect([b.reason, b.message]).toEqual(["branch_not_found", `branch nope not found in ${daemon.url("app.git")}`]);
    const c = await failure(fetchGit(src(daemon.url("app.git"), { commit: "0123456789abcdef0123456789abcdef01234567" }), dest(), ctx()));
    expect(c.reason).toBe("commit_not_found");
    const u = await failure(fetchGit(src("http://127.0.0.1:1/app.git"), dest(), ctx()));
    expect(u.reason).toBe("unreachable");
  });

  it("leaves no partial checkout and no temp files behind after a failure", async () => {
    const d = dest();
    await failure(fetchGit(src(daemon.url("app.git"), { branch: "nope" }), d, ctx()));
    expect(existsSync(d)).toBe(false);
    expect(await gitTemps()).toEqual([]);
  });

  it("kills git (and what it started) when the signal aborts", async () => {
    // A server that accepts and then says nothing: git would wait on it for a long time.
    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => void sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const ac = new AbortController();
      const p = fetchGit(src(`git://127.0.0.1:${port}/hang.git`), dest(), ctx(ac.signal));
      await until(() => sockets.length > 0, 10_000);
      const t0 = Date.now();
      ac.abort();
      const e = await failure(p);
      expect(e.reason).toBe("aborted");
      expect(Date.now() - t0).toBeLessThan(2_000);
      // No git process for that server is left running.
      await until(async () => !(await processes()).some((cmd) => cmd.includes(`127.0.0.1:${port}`)), 5_000);
    } finally {
      sockets.forEach((s) => s.destroy());
      silent.close();
    }
  });
});

describe("private repositories", () => {
  it("authenticates with a token that is in neither argv nor the URL", async () => {
    const d = dest();
    const before = privateWeb.requests.length;
    const r = await fetchGit(src(privateWeb.url("private.git"), { auth: { kind: "token", username: "x-access-token", token: TOKEN } }), d, ctx());
    expect(r.message).toBe("private repo");
    expect(await read(d, "secret.txt")).toBe("private v1\n");
    const mine = privateWeb.requests.slice(before);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((q) => q.authorized && !q.url.includes(TOKEN))).toBe(true);
    // Nothing of the token in the checkout's config or in the progress lines.
    expect(await read(join(d, ".git"), "config")).not.toContain(TOKEN);
    expect(lines.join("\n")).not.toContain(TOKEN);
    expect(lines.join("\n")).not.toContain(Buffer.from(`x-access-token:${TOKEN}`).toString("base64"));
    expect(await gitTemps()).toEqual([]);
  });

  it("fails with 'authentication failed' for a wrong or missing token", async () => {
    const wrong = await failure(fetchGit(src(privateWeb.url("private.git"), { auth: { kind: "token", username: "x-access-token", token: "wrong-token-123" } }), dest(), ctx()));
    expect(wrong.reason).toBe("auth");
    expect(wrong.message).toMatch(/^authentication failed for http:\/\/127\.0\.0\.1:\d+\/private\.git \(.*\): the server rejected the token$/);
    expect(wrong.message).not.toContain("wrong-token-123");
    const none = await failure(fetchGit(src(privateWeb.url("private.git")), dest(), ctx()));
    expect(none.reason).toBe("auth");
    expect(none.message).toMatch(/may be private: use a deploy key or a git app/);
  });

  it("clones with a deploy key over ssh without touching ~/.ssh", async () => {
    const knownHosts = join(homedir(), ".ssh", "known_hosts");
    const before = { dir: existsSync(join(homedir(), ".ssh")), knownHosts: await snapshot(knownHosts), global: await snapshot("/etc/ssh/ssh_known_hosts") };
    const d = dest();
    // OpenSSH refuses a key file other users can read, so success also shows the key was 0600.
    const r = await fetchGit(src(sshd.url("app.git"), { auth: { kind: "ssh", private_key: deployKey.privateKey } }), d, ctx());
    expect(r).toEqual({ commit: app.commits[2], message: "third version" });
    const exact = await fetchGit(src(sshd.url("app.git"), { commit: app.commits[1]!, auth: { kind: "ssh", private_key: deployKey.privateKey.replace(/\n/g, "\r\n") } }), dest(), ctx());
    expect(exact.commit).toBe(app.commits[1]);
    // This sshd does not pass GIT_PROTOCOL, so upload-pack speaks v0 and refuses wants by id: the fallback ran.
    expect(lines).toContain("the server does not serve commits by id; fetching the branch's history instead");
    expect({ dir: existsSync(join(homedir(), ".ssh")), knownHosts: await snapshot(knownHosts), global: await snapshot("/etc/ssh/ssh_known_hosts") }).toEqual(before);
    expect(await gitTemps()).toEqual([]);
  });

  it("fails with 'authentication failed' for a key the server does not know", async () => {
    const other = await sshKeyPair("not-authorized");
    const e = await failure(fetchGit(src(sshd.url("app.git"), { auth: { kind: "ssh", private_key: other.privateKey } }), dest(), ctx()));
    expect(e.reason).toBe("auth");
    expect(e.message).toMatch(/deploy key is added to this repository.*Permission denied \(publickey\)/);
    const junk = await failure(fetchGit(src(sshd.url("app.git"), { auth: { kind: "ssh", private_key: "not a key" } }), dest(), ctx()));
    expect(junk.reason).toBe("auth");
    expect(junk.message).toMatch(/^the deploy key cannot be used/);
  });

  it("refuses auth that does not fit the URL", async () => {
    const t = await failure(fetchGit(src(sshd.url("app.git"), { auth: { kind: "token", username: "x", token: TOKEN } }), dest(), ctx()));
    expect(t.message).toMatch(/token authentication needs an https/);
    const k = await failure(fetchGit(src(web.url("app.git"), { auth: { kind: "ssh", private_key: deployKey.privateKey } }), dest(), ctx()));
    expect(k.message).toMatch(/deploy key needs an ssh repository URL/);
  });
});

describe("injection attempts never run anything", () => {
  const hostileUrls = [
    `--upload-pack=touch ${MARKER}`,
    `--upload-pack=touch${"${IFS}"}${MARKER}`,
    `ext::sh -c touch% ${MARKER}`,
    `ext::sh${"${IFS}"}-c${"${IFS}"}touch%${"${IFS}"}${MARKER}`,
    "file:///etc",
    "/etc",
    `ssh://-oProxyCommand=touch${"${IFS}"}${MARKER}/repo.git`,
    `-oProxyCommand=touch${"${IFS}"}${MARKER}:repo.git`,
    `https://127.0.0.1/$(touch${"${IFS}"}${MARKER}).git`,
    `http://127.0.0.1:1/repo.git;touch${"${IFS}"}${MARKER}`,
  ];
  const hostileBranches = ["--help", `$(touch${"${IFS}"}${MARKER})`, `\`touch${"${IFS}"}${MARKER}\``, `main;touch${"${IFS}"}${MARKER}`, "-b", "--upload-pack=touch"];

  it("the shared validators refuse the hostile URLs and option-like branches", () => {
    for (const url of hostileUrls) {
      expect(DeploySource.safeParse(src(url)).success, url).toBe(false);
    }
    for (const branch of ["--help", "-b", "--upload-pack=touch"]) {
      expect(DeploySource.safeParse(src(web.url("app.git"), { branch })).success, branch).toBe(false);
    }
  });

  it("fetchGit refuses them itself before running git", async () => {
    for (const url of hostileUrls) {
      const e = await failure(fetchGit(src(url), dest(), ctx()));
      expect(e.reason, url).toBe("invalid");
      expect(e.message).toMatch(/^refused: url: /);
    }
    const e = await failure(fetchGit(src(web.url("app.git"), { branch: "--help" }), dest(), ctx()));
    expect(e.message).toMatch(/^refused: branch: /);
    expect(existsSync(MARKER)).toBe(false);
  });

  it("git itself refuses them when forced past the validators", async () => {
    for (const url of hostileUrls) {
      const e = await failure(fetchGitUnvalidated({ url, branch: "main", commit: null, auth: { kind: "none" } }, dest(), ctx()));
      expect(["refused", "not_found", "unreachable", "failed"], `${url}: ${e.reason} ${e.message}`).toContain(e.reason);
    }
    for (const branch of hostileBranches) {
      const e = await failure(fetchGitUnvalidated({ url: daemon.url("app.git"), branch, commit: null, auth: { kind: "none" } }, dest(), ctx()));
      expect(["branch_not_found", "failed"], `${branch}: ${e.reason} ${e.message}`).toContain(e.reason);
    }
    expect(existsSync(MARKER)).toBe(false);
  });

  it("branch names with shell syntax that git allows are refused, and forced past the check are only ever refspec text", async () => {
    const branch = `$(touch${"${IFS}"}${MARKER})`;
    const refused = await failure(fetchGit(src(daemon.url("app.git"), { branch }), dest(), ctx()));
    expect(refused.reason).toBe("invalid");
    const forced = await failure(fetchGitUnvalidated({ url: daemon.url("app.git"), branch, commit: null, auth: { kind: "none" } }, dest(), ctx()));
    expect(forced.reason).toBe("branch_not_found");
    expect(existsSync(MARKER)).toBe(false);
  });
});
