import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "../api/harness.js";

/**
 * Real git servers on loopback for tests: `git daemon` (git://), smart HTTP through
 * `git http-backend` behind a small node server (optionally requiring basic auth), and sshd
 * with a dedicated config whose only authorized key is forced into git-shell. Needs the `git`
 * package, and `openssh-server` for the ssh one (sshd is never started as a service: only
 * this test process runs it, on 127.0.0.1, with its own host key and config).
 */

const execFileP = promisify(execFile);

/** git for fixtures: no system or user config, a fixed identity. */
const FIXTURE_ENV = {
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "Capstan Test",
  GIT_AUTHOR_EMAIL: "test@capstan.invalid",
  GIT_COMMITTER_NAME: "Capstan Test",
  GIT_COMMITTER_EMAIL: "test@capstan.invalid",
  LC_ALL: "C",
};

async function git(args: string[], cwd?: string): Promise<string> {
  try {
    const { stdout } = await execFileP("git", args, { cwd, env: { ...FIXTURE_ENV, HOME: cwd ?? tmpdir() }, timeout: 60_000 });
    return stdout.trim();
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`git ${args.join(" ")} failed: ${e.stderr?.trim() || e.message}`);
  }
}

async function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const sock = net.connect({ host: "127.0.0.1", port }, () => {
        sock.destroy();
        resolve(true);
      });
      sock.once("error", () => resolve(false));
      sock.setTimeout(1_000, () => {
        sock.destroy();
        resolve(false);
      });
    });
    if (ok) return;
    if (Date.now() > end) throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve();
    }, 5_000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

export interface FixtureRepo {
  /** Path relative to the server's base, e.g. "app.git". */
  name: string;
  /** Absolute path of the bare repository. */
  path: string;
  /** Commit ids pushed so far, oldest first. */
  commits: string[];
}

/** Bare repositories under one base directory, made from files with real commits. */
export class GitRepos {
  private constructor(readonly base: string) {}

  static async create(): Promise<GitRepos> {
    return new GitRepos(await mkdtemp(join(tmpdir(), "capstan-git-repos-")));
  }

  /** A bare repo `<name>` whose branch holds `files` in one commit. */
  async repo(name: string, files: Record<string, string>, opts: { branch?: string; message?: string } = {}): Promise<FixtureRepo> {
    const path = join(this.base, name);
    await git(["init", "-q", "--bare", "-b", opts.branch ?? "main", path]);
    const repo: FixtureRepo = { name, path, commits: [] };
    await this.commit(repo, files, opts.message ?? "initial commit", opts.branch ?? "main");
    return repo;
  }

  /** Adds a commit with these files (written over the branch's tree) and pushes it; returns its id. */
  async commit(repo: FixtureRepo, files: Record<string, string>, message: string, branch = "main"): Promise<string> {
    const work = await mkdtemp(join(tmpdir(), "capstan-git-work-"));
    try {
      const heads = await git(["ls-remote", "--heads", "--", repo.path, `refs/heads/${branch}`]);
      if (heads) {
        await git(["clone", "-q", "--branch", branch, "--", repo.path, work]);
      } else {
        await git(["init", "-q", "-b", branch, work]);
      }
      for (const [file, content] of Object.entries(files)) {
        await mkdir(dirname(join(work, file)), { recursive: true });
        await writeFile(join(work, file), content);
      }
      await git(["add", "-A"], work);
      await git(["commit", "-q", "-m", message], work);
      await git(["push", "-q", "--", repo.path, `HEAD:refs/heads/${branch}`], work);
      const sha = await git(["rev-parse", "HEAD"], work);
      repo.commits.push(sha);
      return sha;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  async cleanup(): Promise<void> {
    await rm(this.base, { recursive: true, force: true });
  }
}

export interface GitServer {
  port: number;
  url(repo: string): string;
  stop(): Promise<void>;
}

/** `git daemon` serving every repository under base over git://127.0.0.1:<port>/<name>. */
export async function startGitDaemon(base: string): Promise<GitServer> {
  const port = await freePort();
  const child = spawn(
    "git",
    ["daemon", "--reuseaddr", "--export-all", "--informative-errors", `--base-path=${base}`, "--listen=127.0.0.1", `--port=${port}`, "--", base],
    { env: { ...FIXTURE_ENV, HOME: base }, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  try {
    await waitForPort(port);
  } catch (err) {
    await stopChild(child);
    throw new Error(`git daemon did not start: ${stderr || (err as Error).message}`);
  }
  return { port, url: (repo) => `git://127.0.0.1:${port}/${repo}`, stop: () => stopChild(child) };
}

export interface HttpGitServer extends GitServer {
  /** What each request carried: its path and query (to prove no token is in the URL) and whether it had credentials. */
  requests: { method: string; url: string; authorized: boolean; authorization: string | null }[];
}

/**
 * Smart HTTP: `git http-backend` as a CGI behind node's http server on 127.0.0.1. With `auth`,
 * every request must carry HTTP basic credentials for that user and token (else 401), like a
 * git host's private repository.
 */
export async function startHttpGit(base: string, opts: { auth?: { username: string; token: string } } = {}): Promise<HttpGitServer> {
  const requests: HttpGitServer["requests"] = [];
  const expected = opts.auth ? "Basic " + Buffer.from(`${opts.auth.username}:${opts.auth.token}`).toString("base64") : null;
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://127.0.0.1");
    const authorization = req.headers.authorization ?? null;
    const authorized = expected === null || authorization === expected;
    requests.push({ method: req.method ?? "", url: req.url ?? "", authorized, authorization });
    if (!authorized) {
      req.resume();
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="capstan-test"', "Content-Type": "text/plain" });
      res.end("Authentication required\n");
      return;
    }
    const env: NodeJS.ProcessEnv = {
      ...FIXTURE_ENV,
      HOME: base,
      GIT_PROJECT_ROOT: base,
      GIT_HTTP_EXPORT_ALL: "1",
      PATH_INFO: decodeURIComponent(u.pathname),
      QUERY_STRING: u.search.replace(/^\?/, ""),
      REQUEST_METHOD: req.method ?? "GET",
      CONTENT_TYPE: req.headers["content-type"] ?? "",
      REMOTE_ADDR: "127.0.0.1",
      REMOTE_USER: opts.auth?.username ?? "",
      GIT_PROTOCOL: String(req.headers["git-protocol"] ?? ""),
      HTTP_CONTENT_ENCODING: String(req.headers["content-encoding"] ?? ""),
    };
    const cgi = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "ignore"] });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let sent = false;
    cgi.stdout.on("data", (chunk: Buffer) => {
      if (sent) return void res.write(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n") >= 0 ? head.indexOf("\r\n\r\n") + 4 : head.indexOf("\n\n") >= 0 ? head.indexOf("\n\n") + 2 : -1;
      if (end < 0) return;
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of head.subarray(0, end).toString("latin1").split(/\r?\n/)) {
        const i = line.indexOf(":");
        if (i <= 0) continue;
        const k = line.slice(0, i).trim();
        const v = line.slice(i + 1).trim();
        if (k.toLowerCase() === "status") status = Number.parseInt(v, 10) || 200;
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      sent = true;
      res.write(head.subarray(end));
    });
    cgi.stdout.on("end", () => {
      if (!sent) res.writeHead(502);
      res.end();
    });
    cgi.on("error", () => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    port,
    requests,
    url: (repo) => `http://127.0.0.1:${port}/${repo}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface KeyPair {
  privateKey: string;
  publicKey: string;
}

/** A fresh ed25519 key pair (OpenSSH format), made with ssh-keygen in a temp dir. */
export async function sshKeyPair(comment = "capstan-test"): Promise<KeyPair> {
  const dir = await mkdtemp(join(tmpdir(), "capstan-keygen-"));
  try {
    await execFileP("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", join(dir, "id")], { timeout: 30_000 });
    return { privateKey: await readFile(join(dir, "id"), "utf8"), publicKey: (await readFile(join(dir, "id.pub"), "utf8")).trim() };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const SSHD = "/usr/sbin/sshd";

/**
 * sshd on 127.0.0.1:<port> serving the repositories under base over ssh://root@127.0.0.1:<port>/<abs path>.
 * Its own host key, config and authorized_keys live in a temp dir; the only key it accepts is
 * `authorizedKey`, forced into git-shell (no shell, no forwarding, no pty). Needs openssh-server
 * installed (the package, not the service).
 */
export async function startSshGit(base: string, authorizedKey: string): Promise<GitServer & { hostKey: string }> {
  if (!existsSync(SSHD)) throw new Error(`${SSHD} is missing: install it with apt-get install -y openssh-server`);
  const dir = await mkdtemp(join(tmpdir(), "capstan-sshd-"));
  // sshd insists on its privilege-separation directory.
  await mkdir("/run/sshd", { recursive: true, mode: 0o755 });
  await execFileP("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", join(dir, "host_key")], { timeout: 30_000 });
  await writeFile(join(dir, "authorized_keys"), `command="git-shell -c \\"$SSH_ORIGINAL_COMMAND\\"",restrict ${authorizedKey}\n`, { mode: 0o600 });
  const port = await freePort();
  await writeFile(
    join(dir, "sshd_config"),
    [
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${join(dir, "host_key")}`,
      `PidFile ${join(dir, "sshd.pid")}`,
      `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
      "AuthorizedKeysCommand none",
      "StrictModes no",
      "UsePAM no",
      "PubkeyAuthentication yes",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "PermitRootLogin forced-commands-only",
      "AllowUsers root",
      "AllowTcpForwarding no",
      "X11Forwarding no",
      "PermitTTY no",
      "LogLevel VERBOSE",
      "",
    ].join("\n"),
    { mode: 0o600 },
  );
  const child = spawn(SSHD, ["-D", "-e", "-f", join(dir, "sshd_config")], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  try {
    await waitForPort(port);
  } catch (err) {
    await stopChild(child);
    await rm(dir, { recursive: true, force: true });
    throw new Error(`sshd did not start: ${stderr || (err as Error).message}`);
  }
  return {
    port,
    hostKey: (await readFile(join(dir, "host_key.pub"), "utf8")).trim(),
    url: (repo) => `ssh://root@127.0.0.1:${port}${join(base, repo)}`,
    stop: async () => {
      await stopChild(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
