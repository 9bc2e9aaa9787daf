import { z } from "zod";
import { multiline } from "./text.js";

/**
 * Values that end up in argv of git, docker or compose, in container configuration or in the
 * proxy's configuration. Both ends parse with these: the control plane to answer 422, the agent
 * again before it acts (a job payload is never trusted as shell-safe). The rules are allow-lists:
 * a value that could be read as an option (leading "-"), carries whitespace, control characters
 * or shell syntax, or names a transport git should never use, is refused.
 */

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const noControl = (v: string) => !CONTROL.test(v);

/**
 * Characters a shell gives meaning to. Git takes them in branch names and URL paths, and the
 * agent passes both as argv only; they are refused anyway, so a value that reaches any shell
 * by mistake (a build script, a user's hook) still cannot run anything.
 */
const SHELL_META = /[`$;|&<>(){}'"\\!]/;
export const noShellMeta = (v: string) => !SHELL_META.test(v);
export const SHELL_META_MESSAGE = "Must not contain shell metacharacters such as ` $ ; | & < > ( ) { } ' \" \\ !.";

/** Environment variable names: POSIX portable names. */
export const EnvKey = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "Use letters, digits and underscores, not starting with a digit.");

/**
 * Environment variable values: multi-line text (validation/text.ts: tab and line breaks only);
 * NUL can never be passed to a process.
 */
export const EnvValue = multiline(z.string().max(65_536).refine((v) => !v.includes("\u0000"), "Must not contain NUL characters."));

const HOST_LABEL = "[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?";
const HOSTNAME = new RegExp(`^(?=.{1,253}$)${HOST_LABEL}(\\.${HOST_LABEL})*$`);

/**
 * Git repository URLs: https, http, ssh and git URLs, and the scp-like `user@host:path` form.
 * Never `ext::`, `file://`, local paths, or anything git could take as an option.
 */
export const GitUrl = z
  .string()
  .trim()
  .min(1)
  .max(2048)
  .refine(noControl, "Must not contain control characters.")
  .refine((v) => !/\s/.test(v), "Must not contain whitespace.")
  .refine((v) => !v.startsWith("-"), "Must not start with '-'.")
  .refine(noShellMeta, SHELL_META_MESSAGE)
  .refine((v) => isGitUrl(v), "Use an https://, http://, ssh://, git:// URL or user@host:owner/repo.git.");

const SCP_LIKE = /^([a-zA-Z0-9._-]{1,64})@([a-zA-Z0-9.-]{1,253}):(?!\/\/)([a-zA-Z0-9._~/-]{1,1024})$/;

export function isGitUrl(v: string): boolean {
  const scp = SCP_LIKE.exec(v);
  if (scp) return HOSTNAME.test(scp[2]!) && !scp[3]!.split("/").some((seg) => seg === ".." || seg.startsWith("-"));
  if (!URL.canParse(v)) return false;
  const u = new URL(v);
  if (!["https:", "http:", "ssh:", "git:"].includes(u.protocol)) return false;
  if (!u.hostname || u.search || u.hash) return false;
  const host = u.hostname.replace(/^\[|\]$/g, "");
  if (!HOSTNAME.test(host) && !z.ipv4().safeParse(host).success && !z.ipv6().safeParse(host).success) return false;
  // Only an ssh URL may carry a user (git@...); credentials in http URLs belong in a git app.
  if (u.password || (u.username && u.protocol !== "ssh:")) return false;
  return /^\/[a-zA-Z0-9._~/%-]*$/.test(u.pathname) && !u.pathname.split("/").some((seg) => seg === ".." || seg.startsWith("-"));
}

/** `owner/name` of a repository on a git app's host (GitHub style). */
export const RepoSlug = z
  .string()
  .trim()
  .regex(/^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/, "Use the owner/name form.")
  .refine((v) => !v.split("/").some((s) => s === "." || s === ".." || s.startsWith("-")), "Use the owner/name form.");

/** Branch names as `git check-ref-format --branch` accepts them, minus anything option-like. */
export const GitBranch = z
  .string()
  .trim()
  .min(1)
  .max(255)
  .refine(noControl, "Must not contain control characters.")
  .refine(noShellMeta, SHELL_META_MESSAGE)
  .refine((v) => isBranchName(v), "Not a valid git branch name.");

export function isBranchName(v: string): boolean {
  if (v.startsWith("-") || v.startsWith("/") || v.endsWith("/") || v.endsWith(".") || v.endsWith(".lock")) return false;
  if (v === "@" || v.includes("..") || v.includes("@{") || v.includes("//")) return false;
  if (/[\s~^:?*[\\\x7f]/.test(v) || CONTROL.test(v)) return false;
  return !v.split("/").some((seg) => seg.startsWith("."));
}

/** A commit id: 7 to 40 (SHA-1) or 64 (SHA-256) hex digits. */
export const CommitSha = z
  .string()
  .trim()
  .regex(/^([0-9a-fA-F]{7,40}|[0-9a-fA-F]{64})$/, "Use a hexadecimal commit id (7 to 40 characters).")
  .transform((v) => v.toLowerCase());

/**
 * Image references as the Docker reference grammar defines them:
 * [registry[:port]/]path[:tag][@digest], lowercase path components.
 */
export const ImageRef = z
  .string()
  .trim()
  .min(1)
  .max(512)
  .refine((v) => isImageRef(v), "Use an image reference such as nginx:1.27 or registry.example.com/team/app:tag.");

const PATH_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const DOMAIN = `(?:${HOST_LABEL}(?:\\.${HOST_LABEL})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]{1,5})?`;
const IMAGE_REF = new RegExp(
  `^(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::[\\w][\\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`,
);

export function isImageRef(v: string): boolean {
  return IMAGE_REF.test(v) && !v.startsWith("-");
}

/** Absolute container paths for mounts: no traversal, no control characters, no ":" (volume spec separator). */
export const MountPath = z
  .string()
  .trim()
  .min(2)
  .max(1024)
  .refine(noControl, "Must not contain control characters.")
  .refine((v) => v.startsWith("/"), "Use an absolute path.")
  .refine((v) => !v.includes(":") && !v.includes(","), "Must not contain ':' or ','.")
  .refine((v) => !v.split("/").some((seg) => seg === ".." || seg === "."), "Must not contain '.' or '..' segments.")
  .refine((v) => v !== "/", "Mounting over / is not allowed.");

// Host paths of bind mounts (HostPath, checkHostPath): ./host-path.ts.

/** Docker volume names (the engine's own rule), also used as container and network names. */
export const VolumeName = z
  .string()
  .trim()
  .regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/, "Use letters, digits, '_', '.' and '-', starting with a letter or digit.");

/** A DNS host name for the proxy (no scheme, no port); a leading "*." wildcard is allowed. */
export const DomainName = z
  .string()
  .trim()
  .toLowerCase()
  .refine((v) => HOSTNAME.test(v.startsWith("*.") ? v.slice(2) : v), "Use a valid domain name.");

/** TCP/UDP port numbers. */
export const Port = z.number().int().min(1).max(65_535);

/**
 * `ports_exposes`: comma-separated ports the application listens on inside its container;
 * the first one is where the proxy sends traffic.
 */
export const PortList = z
  .string()
  .trim()
  .regex(/^[0-9]{1,5}(\s*,\s*[0-9]{1,5})*$/, "Use comma-separated port numbers, e.g. 3000 or 80,443.")
  .refine((v) => v.split(",").every((p) => Number(p) >= 1 && Number(p) <= 65_535), "Ports must be between 1 and 65535.")
  .transform((v) => v.split(",").map((p) => p.trim()).join(","));

export function parsePortList(v: string): number[] {
  return v.split(",").map((p) => Number(p.trim())).filter((n) => Number.isInteger(n) && n >= 1 && n <= 65_535);
}

/** An application's public address: an http(s) URL with a host name and nothing but an optional path. */
export const FqdnUrl = z
  .string()
  .trim()
  .max(2048)
  .refine((v) => {
    const withScheme = /^[a-z]+:\/\//i.test(v) ? v : `https://${v}`;
    if (!URL.canParse(withScheme)) return false;
    const u = new URL(withScheme);
    return (u.protocol === "http:" || u.protocol === "https:") && !u.username && !u.password && !u.search && !u.hash && HOSTNAME.test(u.hostname);
  }, "Use a URL like https://app.example.com (http:// switches HTTPS off for that domain).");

/** Docker memory limits: 512m, 2g, 1073741824 (bytes). At least 6 MiB, the engine's minimum. */
export const MemoryLimit = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^[0-9]+(\.[0-9]+)?[bkmg]?$/, "Use a size like 512m or 2g.")
  .refine((v) => parseMemory(v) >= 6 * 1024 * 1024, "Must be at least 6m.");

export function parseMemory(v: string): number {
  const m = /^([0-9]+(?:\.[0-9]+)?)([bkmg]?)$/.exec(v.trim().toLowerCase());
  if (!m) return NaN;
  const mult = { "": 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2] as "" | "b" | "k" | "m" | "g"];
  return Math.floor(Number(m[1]) * mult);
}

/** CPU limits: 0.5, 1, 2 (cores). */
export const CpuLimit = z
  .string()
  .trim()
  .regex(/^[0-9]+(\.[0-9]{1,3})?$/, "Use a number of cores like 0.5 or 2.")
  .refine((v) => Number(v) > 0 && Number(v) <= 512, "Must be more than 0 and at most 512.");

/** Relative directories inside a repository (base_directory): no traversal, no option-like segments. */
export const RepoDirectory = z
  .string()
  .trim()
  .max(1024)
  .default("/")
  .refine(noControl, "Must not contain control characters.")
  .refine((v) => !v.split("/").some((seg) => seg === ".." || seg.startsWith("-")), "Must stay inside the repository.")
  .refine((v) => /^[a-zA-Z0-9._/@+-]*$/.test(v), "Use letters, digits and . _ - / @ + only.")
  .transform((v) => "/" + v.split("/").filter((s) => s && s !== ".").join("/"));

/** An HTTP path for health checks. */
export const HttpPath = z
  .string()
  .trim()
  .max(2048)
  .regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*$/, "Use a path starting with /.");

/**
 * Health check paths. The probe runs inside the application's container through its shell
 * (curl or wget, whichever the image has), single-quoted; this allow-list keeps quotes, `$`,
 * backticks and backslashes out so the value can never leave the quotes.
 */
export const HealthPath = z
  .string()
  .trim()
  .max(1024)
  .regex(/^\/[A-Za-z0-9._~/-]*(\?[A-Za-z0-9._~=&%-]*)?$/, "Use a path like /health or /healthz?full=1 (letters, digits, . _ ~ / - and a simple query).");
