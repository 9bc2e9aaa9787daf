import type { GitAuth } from "@capstan/shared";

/** Transports a clone may use. Everything else (file, ext, fd, local paths...) is refused by git itself. */
export const ALLOWED_PROTOCOLS = ["https", "http", "ssh", "git"] as const;

/**
 * `-c` options put in front of every git command: protocol allow-list, no hooks, no
 * credential helpers from anywhere, no interactive anything. These hold even if a hostile
 * value got past the validators.
 */
export function hardeningArgs(): string[] {
  const args = ["-c", "protocol.allow=never"];
  for (const p of ALLOWED_PROTOCOLS) args.push("-c", `protocol.${p}.allow=always`);
  args.push(
    "-c", "core.hooksPath=/dev/null",
    "-c", "credential.helper=",
    "-c", "core.askPass=",
    "-c", "core.fsmonitor=false",
    "-c", "submodule.recurse=false",
    "-c", "advice.detachedHead=false",
    "-c", "init.defaultBranch=capstan",
  );
  return args;
}

export interface SessionPaths {
  /** Private temp dir (0700) holding the files below; removed after the fetch. */
  dir: string;
  /** GIT_CONFIG_GLOBAL (0600): empty, or the token's Authorization header scoped to the URL. */
  config: string;
  /** Deploy key (0600), ssh auth only. */
  key: string;
  /** UserKnownHostsFile for this fetch only. */
  knownHosts: string;
}

/** Temp paths go into GIT_SSH_COMMAND, which git runs through a shell: only plain characters. */
const SAFE_PATH = /^\/[A-Za-z0-9._/-]+$/;

/** The ssh command for a deploy-key fetch: this key only, this fetch's known_hosts only, no ~/.ssh. */
export function sshCommand(paths: Pick<SessionPaths, "key" | "knownHosts">): string {
  for (const p of [paths.key, paths.knownHosts]) {
    if (!SAFE_PATH.test(p)) throw new Error(`unsafe temp path for ssh: ${p}`);
  }
  return [
    "ssh",
    "-F", "/dev/null",
    "-i", `'${paths.key}'`,
    "-o", "IdentitiesOnly=yes",
    "-o", "IdentityAgent=none",
    "-o", `UserKnownHostsFile='${paths.knownHosts}'`,
    "-o", "GlobalKnownHostsFile=/dev/null",
    "-o", "StrictHostKeyChecking=accept-new",
    "-o", "UpdateHostKeys=no",
    "-o", "BatchMode=yes",
    "-o", "PasswordAuthentication=no",
    "-o", "KbdInteractiveAuthentication=no",
    "-o", "ControlMaster=no",
    "-o", "ControlPath=none",
    "-o", "PermitLocalCommand=no",
    "-o", "ConnectTimeout=30",
    "-o", "ServerAliveInterval=15",
    "-o", "ServerAliveCountMax=4",
    "-o", "LogLevel=ERROR",
  ].join(" ");
}

/**
 * Environment for git: nothing inherited but PATH, no system or user config (the global config
 * is this fetch's private file), HOME in the temp dir, no prompts, C locale so error messages
 * can be recognised, and stalled transfers abort.
 */
export function gitEnv(paths: SessionPaths, auth: GitAuth, basePath = process.env.PATH): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: basePath ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: paths.dir,
    XDG_CONFIG_HOME: paths.dir,
    LANG: "C",
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: paths.config,
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: "",
    SSH_ASKPASS: "",
    SSH_ASKPASS_REQUIRE: "never",
    GIT_ALLOW_PROTOCOL: ALLOWED_PROTOCOLS.join(":"),
    GIT_PROTOCOL_FROM_USER: "0",
    GIT_HTTP_LOW_SPEED_LIMIT: "1000",
    GIT_HTTP_LOW_SPEED_TIME: "60",
    GIT_LFS_SKIP_SMUDGE: "1",
  };
  if (auth.kind === "ssh") {
    env.GIT_SSH_COMMAND = sshCommand(paths);
    env.GIT_SSH_VARIANT = "ssh";
  }
  return env;
}

/** Basic credentials as git sends them, base64 of `user:token`. */
export function basicCredentials(username: string, token: string): string {
  return Buffer.from(`${username}:${token}`, "utf8").toString("base64");
}

/**
 * The private global config. For token auth: an Authorization header for URLs under the
 * repository's origin only (git's http.<url>.* matching), so the token is in neither argv
 * nor the URL and is not sent to any other host.
 */
export function configFile(url: string, auth: GitAuth): string {
  if (auth.kind !== "token") return "";
  const origin = new URL(url);
  const scope = `${origin.protocol}//${origin.host}/`;
  return [`[http "${scope}"]`, `\textraHeader = Authorization: Basic ${basicCredentials(auth.username, auth.token)}`, ""].join("\n");
}

export type UrlKind = "http" | "ssh" | "git";

/** Which transport a validated URL uses (scp-like user@host:path is ssh). */
export function urlKind(url: string): UrlKind {
  if (/^https?:\/\//i.test(url)) return "http";
  if (/^git:\/\//i.test(url)) return "git";
  return "ssh";
}

/** Refspec that fetches one branch into a remote-tracking ref. The branch is already validated. */
export function branchRefspec(branch: string): string {
  return `+refs/heads/${branch}:refs/remotes/origin/${branch}`;
}

export function fetchArgs(url: string, refspecs: string[], depth: number | null): string[] {
  const args = [...hardeningArgs(), "fetch", "--no-tags", "--no-recurse-submodules", "--progress"];
  if (depth !== null) args.push(`--depth=${depth}`);
  // "--": a URL or refspec starting with "-" can never be read as an option.
  return [...args, "--", url, ...refspecs];
}

/** Replaces every secret (and anything that looks like credentials) in a line of git output. */
export function masker(secrets: string[]): (line: string) => string {
  const list = secrets.filter((s) => s.length >= 4).sort((a, b) => b.length - a.length);
  return (line) => {
    let out = line;
    for (const s of list) out = out.split(s).join("***");
    return out
      .replace(/(authorization:\s*)(\S+\s+)?\S+/gi, "$1***")
      .replace(/(\/\/)[^/@\s:]+:[^/@\s]+@/g, "$1***@")
      .replace(/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g, "***");
  };
}
