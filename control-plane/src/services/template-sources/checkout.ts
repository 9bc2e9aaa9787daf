import { spawn } from "node:child_process";
import { lookup } from "node:dns/promises";
import { lstat, mkdtemp, readdir, realpath, rm } from "node:fs/promises";
import { isIP } from "node:net";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { isRefusedAddress } from "@capstan/shared/net";

/**
 * A shallow git checkout of one branch of a template source, made with the `git` binary
 * (argv arrays only). What it must never do: put the token in argv, a log or an error text;
 * run hooks, submodules or any transport but http(s)/git; read the system's or a user's git
 * config; prompt; run for ever; fill the disk.
 */

export interface CheckoutLimits {
  /** The whole clone (the process tree is killed after it). */
  timeoutMs: number;
  /** Bytes of the checkout on disk (.git included), watched while git writes. */
  maxBytes: number;
}

export const CHECKOUT_LIMITS: CheckoutLimits = { timeoutMs: 120_000, maxBytes: 256 * 1024 * 1024 };

export interface CheckoutRequest {
  url: string;
  branch: string;
  /** Opened token; sent as HTTP basic credentials to the repository's origin only. */
  token: string | null;
  allowPrivate: boolean;
  limits?: CheckoutLimits;
  /** Aborts the clone (control-plane shutdown). */
  signal?: AbortSignal;
}

export interface Checkout {
  dir: string;
  commit: string;
  /** Removes the checkout (always call it). */
  remove(): Promise<void>;
}

/** A sync failure whose message may be shown (it is scrubbed of the token). */
export class CheckoutError extends Error {
  override name = "CheckoutError";
}

/** The username sent with a token: GitHub, Gitea and Bitbucket take any; GitLab wants a non-empty one. */
export const TOKEN_USERNAME = "x-access-token";

const SETTING = "PLATFORM_ALLOW_PRIVATE_ENDPOINTS";

/**
 * Refuses hosts that are, or resolve to, loopback, link-local or metadata addresses (the rule of
 * git apps and S3 endpoints) unless the instance allows private endpoints. git resolves the name
 * again when it connects: a name that changes its answer in between is not caught (documented).
 */
export async function checkRepositoryHost(url: string, allowPrivate: boolean): Promise<void> {
  if (allowPrivate) return;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "").replace(/\.+$/, "").toLowerCase();
  const refuse = (what: string) => {
    throw new CheckoutError(`${what} a loopback, link-local or metadata address; refused (the instance setting ${SETTING} allows it)`);
  };
  if (host === "localhost" || host.endsWith(".localhost")) refuse(`${host} is`);
  if (isIP(host)) {
    if (isRefusedAddress(host)) refuse(`${host} is`);
    return;
  }
  let addresses;
  try {
    addresses = await lookup(host, { all: true });
  } catch (err) {
    throw new CheckoutError(`cannot resolve ${host} (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
  const bad = addresses.find((a) => isRefusedAddress(a.address));
  if (bad) refuse(`${host} resolves to ${bad.address},`);
}

/** Every form the token could take in git's output (plain, URL-encoded, in the basic header). */
function secretForms(token: string | null): string[] {
  if (!token) return [];
  const basic = Buffer.from(`${TOKEN_USERNAME}:${token}`).toString("base64");
  return [token, encodeURIComponent(token), basic, Buffer.from(token).toString("base64")].filter((s) => s.length >= 4);
}

/** git's words with every form of the token replaced, one line, short. */
export function scrub(text: string, token: string | null, max = 300): string {
  let out = text;
  for (const s of secretForms(token)) out = out.split(s).join("***");
  out = out.replace(/Authorization:[^\n]*/gi, "Authorization: ***");
  const line = out.replace(/[\u0000-\u001f\u007f]+/g, " ").replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** No system or user config, no prompts, no editor, C locale: git behaves the same everywhere. */
function gitEnv(home: string, extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: "/bin/false",
    SSH_ASKPASS: "/bin/false",
    GIT_PROTOCOL_FROM_USER: "0",
    ...extra,
  };
}

/** Config given on the command line: safe values only, never a secret. */
const SAFE_CONFIG = [
  "core.hooksPath=/dev/null",
  "core.fsmonitor=false",
  "core.symlinks=false",
  "protocol.allow=never",
  "protocol.https.allow=always",
  "protocol.http.allow=always",
  "protocol.git.allow=always",
  "submodule.recurse=false",
  "advice.detachedHead=false",
  "credential.helper=",
];

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  const walk = async (d: string) => {
    let entries;
    try {
      entries = await readdir(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else {
        try {
          total += (await lstat(p)).size;
        } catch {
          /* removed while walking (git renames its temp packs) */
        }
      }
    }
  };
  await walk(dir);
  return total;
}

function runGit(args: string[], env: NodeJS.ProcessEnv, opts: { timeoutMs: number; signal?: AbortSignal; watch?: { dir: string; maxBytes: number } }): Promise<{ stdout: string }> {
  return new Promise((resolve, reject) => {
    // Its own process group: git runs git-remote-http and index-pack as children; a kill reaches them all.
    const child = spawn("git", args, { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    let killedFor: string | null = null;
    child.stdout.on("data", (d: Buffer) => {
      if (stdout.length < 65_536) stdout += d.toString("utf8");
    });
    child.stderr.on("data", (d: Buffer) => {
      if (stderr.length < 65_536) stderr += d.toString("utf8");
    });
    const kill = (why: string) => {
      if (killedFor !== null) return;
      killedFor = why;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    };
    const timer = setTimeout(() => kill(`the clone took longer than ${Math.round(opts.timeoutMs / 1000)} s`), opts.timeoutMs);
    const onAbort = () => kill("the control plane stopped during the sync");
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    let watching = false;
    const watcher = opts.watch
      ? setInterval(() => {
          if (watching) return;
          watching = true;
          void dirBytes(opts.watch!.dir)
            .then((n) => {
              if (n > opts.watch!.maxBytes) kill(`the checkout is larger than ${opts.watch!.maxBytes} bytes`);
            })
            .finally(() => (watching = false));
        }, 250)
      : null;
    const done = () => {
      clearTimeout(timer);
      if (watcher) clearInterval(watcher);
      opts.signal?.removeEventListener("abort", onAbort);
    };
    child.on("error", (err) => {
      done();
      reject(new CheckoutError(`cannot run git: ${err.message}`));
    });
    child.on("close", (code) => {
      done();
      if (killedFor !== null) return reject(new CheckoutError(killedFor));
      if (code !== 0) return reject(Object.assign(new CheckoutError("git failed"), { stderr }));
      resolve({ stdout });
    });
  });
}

/**
 * Clones `branch` of `url` (depth 1, that branch only, no tags, no submodules, no hooks, no
 * symlinks made) into a new temp directory. The token goes to git through GIT_CONFIG_* variables
 * as an Authorization header scoped to the repository's origin, with redirects refused (a
 * redirect elsewhere would carry the header along).
 */
export async function checkout(req: CheckoutRequest): Promise<Checkout> {
  const limits = req.limits ?? CHECKOUT_LIMITS;
  await checkRepositoryHost(req.url, req.allowPrivate);
  const base = await mkdtemp(join(tmpdir(), "capstan-template-source-"));
  const remove = () => rm(base, { recursive: true, force: true });
  const dir = join(base, "checkout");
  const extra: Record<string, string> = {};
  if (req.token !== null && new URL(req.url).protocol !== "git:") {
    const origin = new URL(req.url).origin;
    extra.GIT_CONFIG_COUNT = "2";
    extra.GIT_CONFIG_KEY_0 = `http.${origin}/.extraHeader`;
    extra.GIT_CONFIG_VALUE_0 = `Authorization: Basic ${Buffer.from(`${TOKEN_USERNAME}:${req.token}`).toString("base64")}`;
    extra.GIT_CONFIG_KEY_1 = "http.followRedirects";
    extra.GIT_CONFIG_VALUE_1 = "false";
  }
  const env = gitEnv(base, extra);
  const config = SAFE_CONFIG.flatMap((c) => ["-c", c]);
  try {
    try {
      await runGit(
        [...config, "clone", "--quiet", "--depth", "1", "--single-branch", "--no-tags", "--no-recurse-submodules", "--branch", req.branch, "--", req.url, dir],
        env,
        { timeoutMs: limits.timeoutMs, ...(req.signal ? { signal: req.signal } : {}), watch: { dir: base, maxBytes: limits.maxBytes } },
      );
    } catch (err) {
      const stderr = (err as { stderr?: string }).stderr;
      if (stderr !== undefined) throw new CheckoutError(`git clone failed: ${scrub(stderr, req.token) || "no reason given"}`);
      throw err;
    }
    const total = await dirBytes(base);
    if (total > limits.maxBytes) throw new CheckoutError(`the checkout is larger than ${limits.maxBytes} bytes`);
    const { stdout } = await runGit([...config, "-C", dir, "rev-parse", "HEAD"], gitEnv(base, {}), { timeoutMs: 10_000 });
    return { dir, commit: stdout.trim(), remove };
  } catch (err) {
    await remove();
    throw err;
  }
}

/**
 * The folder `folderPath` inside the checkout, as a real path that is still inside it: a
 * symlinked folder pointing out of the checkout (or anywhere) is refused.
 */
export async function folderInside(checkoutDir: string, folderPath: string): Promise<string> {
  const root = await realpath(checkoutDir);
  if (folderPath === "") return root;
  if (folderPath.split("/").some((s) => s === "" || s === "." || s === "..")) throw new CheckoutError(`folder_path ${folderPath} is not a plain relative path`);
  const wanted = join(root, ...folderPath.split("/"));
  let real;
  try {
    real = await realpath(wanted);
  } catch {
    throw new CheckoutError(`the folder ${folderPath} does not exist on this branch`);
  }
  if (real !== wanted || !real.startsWith(root + sep)) throw new CheckoutError(`the folder ${folderPath} is a symbolic link (not followed)`);
  const st = await lstat(real);
  if (!st.isDirectory()) throw new CheckoutError(`${folderPath} is not a folder`);
  return real;
}
