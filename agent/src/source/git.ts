import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CommitSha, type DeploySource, GitAuth, GitBranch, GitUrl } from "@capstan/shared";
import { z } from "zod";
import {
  basicCredentials,
  branchRefspec,
  configFile,
  fetchArgs,
  gitEnv,
  hardeningArgs,
  masker,
  type SessionPaths,
  urlKind,
} from "./git-args.js";
import { classify, describe, GitError, keyLine, refusedWant } from "./git-errors.js";
import { run, type RunResult } from "./process.js";

export { GitError } from "./git-errors.js";

export type GitSource = Extract<DeploySource, { kind: "git" }>;

export interface FetchContext {
  signal: AbortSignal;
  progress(line: string): void;
}

export interface FetchResult {
  /** Full commit id checked out. */
  commit: string;
  /** Its subject line. */
  message: string;
}

const GitSourceInput = z.object({ url: GitUrl, branch: GitBranch, commit: CommitSha.nullable(), auth: GitAuth });

/** Network commands may take long on big repositories; ctx.signal (the job deadline) usually ends them first. */
const FETCH_TIMEOUT_MS = 60 * 60_000;
const LOCAL_TIMEOUT_MS = 5 * 60_000;
const PROGRESS_EVERY_MS = 2_000;

/**
 * Checks out `src` (its branch, or exactly its commit) into `dest` with the git CLI: argv only,
 * every positional after "--", a transport allow-list, no system or user config, no prompts.
 * Auth: a deploy key (ssh) or a token (http basic, in a private config file) used for this
 * fetch only, in a private temp dir (0700, files 0600) that is removed afterwards; ~/.ssh and
 * the host's known_hosts are never read or written. Aborting ctx.signal kills git and its
 * children. `dest` must be absent or empty; on failure what was created there is removed.
 * The payload is validated again here: a job payload is never trusted to be shell-safe.
 */
export async function fetchGit(src: GitSource, dest: string, ctx: FetchContext): Promise<FetchResult> {
  const parsed = GitSourceInput.safeParse(src);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new GitError(`refused: ${issue?.path.join(".") || "source"}: ${issue?.message ?? "invalid"}`, "invalid");
  }
  return fetchGitUnvalidated(parsed.data, dest, ctx);
}

/**
 * fetchGit without the validators in front. Exported only so that tests can prove git's own
 * guards (transport allow-list, "--") hold when a hostile value gets this far; use fetchGit.
 */
export async function fetchGitUnvalidated(src: Omit<GitSource, "kind">, dest: string, ctx: FetchContext): Promise<FetchResult> {
  const { url, branch, auth } = src;
  const commit = src.commit ? src.commit.toLowerCase() : null;
  const kind = urlKind(url);
  if (auth.kind === "token" && kind !== "http") throw new GitError("refused: token authentication needs an https:// repository URL", "invalid");
  if (auth.kind === "ssh" && kind !== "ssh") throw new GitError("refused: a deploy key needs an ssh repository URL (git@host:owner/repo.git or ssh://...)", "invalid");

  const target = resolve(dest);
  const created = await prepareDest(target);
  const paths = await openSession(url, auth);
  const secrets = auth.kind === "token" ? [auth.token, basicCredentials(auth.username, auth.token)] : [];
  const mask = masker(secrets);
  const git = new GitRunner(target, gitEnv(paths, auth), ctx, mask);
  const label: Label = { url: mask(url), branch, commit, auth: auth.kind };
  try {
    await git.local(["init", "-q"]);
    const sha = commit ? await fetchCommit(git, url, branch, commit, label) : await fetchBranch(git, url, branch, label);
    await git.local(["checkout", "-q", "--force", "--detach", sha]);
    const message = (await git.local(["log", "-1", "--format=%s", sha, "--"])).trim();
    ctx.progress(`checked out ${sha.slice(0, 12)}${message ? ` (${message.slice(0, 120)})` : ""}`);
    return { commit: sha, message };
  } catch (err) {
    if (created) await rm(target, { recursive: true, force: true }).catch(() => {});
    throw err;
  } finally {
    await rm(paths.dir, { recursive: true, force: true }).catch(() => {});
  }
}

async function fetchBranch(git: GitRunner, url: string, branch: string, label: Label): Promise<string> {
  git.ctx.progress(`fetching branch ${branch} from ${label.url}`);
  const r = await git.network(fetchArgs(url, [branchRefspec(branch)], 1));
  if (r.code !== 0) throw git.failure(r, label);
  return git.revParse(`refs/remotes/origin/${branch}`);
}

/**
 * The exact commit: asked for by id with depth 1 (servers that allow it, e.g. GitHub, send just
 * that); when the server refuses wants by id, or the id is abbreviated, the branch's whole
 * history, then every branch, is fetched and searched.
 */
async function fetchCommit(git: GitRunner, url: string, branch: string, commit: string, label: Label): Promise<string> {
  if (commit.length === 40 || commit.length === 64) {
    git.ctx.progress(`fetching commit ${commit.slice(0, 12)} from ${label.url}`);
    const r = await git.network(fetchArgs(url, [commit], 1));
    if (r.code === 0) return git.revParse(commit);
    if (!refusedWant(r.stderrTail)) throw git.failure(r, label);
    git.ctx.progress("the server does not serve commits by id; fetching the branch's history instead");
  }
  const r = await git.network(fetchArgs(url, [branchRefspec(branch)], null));
  if (r.code !== 0) throw git.failure(r, label);
  const onBranch = await git.tryRevParse(commit);
  if (onBranch) return onBranch;
  git.ctx.progress(`commit ${commit} is not on ${branch}; fetching every branch`);
  const all = await git.network(fetchArgs(url, ["+refs/heads/*:refs/remotes/origin/*"], null));
  if (all.code !== 0) throw git.failure(all, label);
  const anywhere = await git.tryRevParse(commit);
  if (anywhere) return anywhere;
  throw new GitError(describe("commit_not_found", label, ""), "commit_not_found");
}

type Label = { url: string; branch: string; commit: string | null; auth: GitAuth["kind"] };

/** Runs git commands in the checkout with the session's environment; progress is throttled and masked. */
class GitRunner {
  constructor(
    private readonly cwd: string,
    private readonly env: NodeJS.ProcessEnv,
    readonly ctx: FetchContext,
    private readonly mask: (line: string) => string,
  ) {}

  private async exec(argv: string[], timeoutMs: number, onLine?: (line: string) => void): Promise<RunResult> {
    try {
      const r = await run("git", argv, { cwd: this.cwd, env: this.env, signal: this.ctx.signal, timeoutMs, onLine });
      if (r.killed === "aborted") throw new GitError(describe("aborted", { url: "", branch: "" }, ""), "aborted");
      if (r.killed === "timeout") throw new GitError(describe("timeout", { url: "", branch: "" }, ""), "timeout");
      return r;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new GitError("git is not installed on this server", "failed");
      throw err;
    }
  }

  /** A fetch: its stderr becomes progress lines (masked, at most one per phase every 2 s). */
  network(argv: string[]): Promise<RunResult> {
    let phase = "";
    let last = 0;
    return this.exec(argv, FETCH_TIMEOUT_MS, (raw) => {
      const line = this.mask(raw);
      const m = /^(remote: )?([A-Za-z ]+):\s+\d+%/.exec(line);
      if (m) {
        const now = Date.now();
        const done = /done\.?$/.test(line);
        if (m[2] === phase && !done && now - last < PROGRESS_EVERY_MS) return;
        phase = m[2]!;
        last = now;
      }
      this.ctx.progress(line);
    });
  }

  async local(args: string[]): Promise<string> {
    const r = await this.exec([...hardeningArgs(), ...args], LOCAL_TIMEOUT_MS);
    if (r.code !== 0) throw new GitError(`git ${args[0]} failed: ${keyLine(r.stderrTail.map(this.mask))}`, "failed");
    return r.stdout;
  }

  async tryRevParse(rev: string): Promise<string | null> {
    const r = await this.exec([...hardeningArgs(), "rev-parse", "--verify", "--quiet", "--end-of-options", `${rev}^{commit}`], LOCAL_TIMEOUT_MS);
    const sha = r.stdout.trim();
    return r.code === 0 && /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(sha) ? sha : null;
  }

  async revParse(rev: string): Promise<string> {
    const sha = await this.tryRevParse(rev);
    if (!sha) throw new GitError(`fetched, but ${rev} is not a commit`, "failed");
    return sha;
  }

  failure(r: RunResult, label: Label): GitError {
    const tail = r.stderrTail.map(this.mask);
    const reason = classify(tail);
    return new GitError(describe(reason, label, keyLine(tail, reason)), reason);
  }
}

/** Creates dest if needed; refuses a non-empty one. Returns whether it was created here. */
async function prepareDest(dest: string): Promise<boolean> {
  let entries: string[] | null = null;
  try {
    entries = await readdir(dest);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw new GitError(`cannot use ${dest}: ${(err as Error).message}`, "failed");
  }
  if (entries && entries.length > 0) throw new GitError(`checkout directory ${dest} is not empty`, "failed");
  await mkdir(dest, { recursive: true, mode: 0o700 });
  return entries === null;
}

/** The private temp dir with this fetch's config, key and known_hosts. */
async function openSession(url: string, auth: GitAuth): Promise<SessionPaths> {
  const dir = await mkdtemp(join(tmpdir(), "capstan-git-"));
  const paths: SessionPaths = { dir, config: join(dir, "config"), key: join(dir, "key"), knownHosts: join(dir, "known_hosts") };
  try {
    await writeFile(paths.config, configFile(url, auth), { mode: 0o600, flag: "wx" });
    if (auth.kind === "ssh") {
      // OpenSSH rejects keys with CRLF line ends or without the final newline.
      const key = auth.private_key.replace(/\r\n?/g, "\n").trim() + "\n";
      await writeFile(paths.key, key, { mode: 0o600, flag: "wx" });
      await writeFile(paths.knownHosts, "", { mode: 0o600, flag: "wx" });
    }
    return paths;
  } catch (err) {
    await rm(dir, { recursive: true, force: true }).catch(() => {});
    throw err;
  }
}
