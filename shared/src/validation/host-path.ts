import { z } from "zod";

/**
 * Host paths of bind mounts (application storages, compose volumes). One rule, used by the
 * control plane before anything is stored and by the agent again right before a container is
 * created:
 *
 * 1. The path is normalised first, lexically: repeated slashes collapse, `.` segments go, `..`
 *    removes the segment before it (never above /), a trailing slash goes. `//etc`,
 *    `/var//run/docker.sock` and `/srv/app/../../etc` are then what the kernel sees: /etc,
 *    /var/run/docker.sock, /etc. The normalised form is what gets stored and mounted.
 * 2. It may be mounted only if it neither is, nor lies inside, nor contains a sensitive path
 *    (SENSITIVE_HOST_PATHS): `/etc/ssh` lies inside /etc, `/var` contains /var/lib/docker, `/`
 *    contains everything. Application directories such as /srv, /opt, /data, /mnt stay open.
 * 3. No control characters, no `:` or `,` (separators of the engine's and compose's mount
 *    syntax), absolute paths only.
 *
 * Symbolic links are not resolved (the control plane cannot see the server's filesystem);
 * docs/decisions.md says what that leaves to the operator.
 */

/**
 * Directories of the server that a bind mount may never expose, be inside of, or contain: the
 * system (binaries, libraries, configuration, kernel interfaces, boot), users' homes and root's,
 * runtime sockets (the Docker socket lives in /run, /var/run), the engine's and the agent's state
 * (/var/lib), logs, spools (cron jobs), mail, caches, backups of system files, the shared
 * temporary directories (other users' sockets: ssh agents, tmux sessions), and the files at the
 * root that are the kernel, the initial ramdisk (links into /boot), swap (other processes' memory)
 * or fsck's recovered fragments.
 */
export const SENSITIVE_HOST_PATHS = [
  "/bin",
  "/boot",
  "/dev",
  "/efi",
  "/etc",
  "/home",
  "/initrd.img",
  "/initrd.img.old",
  "/lib",
  "/lib32",
  "/lib64",
  "/libx32",
  "/lost+found",
  "/proc",
  "/root",
  "/run",
  "/sbin",
  "/swap.img",
  "/swapfile",
  "/sys",
  "/tmp",
  "/usr",
  "/var/backups",
  "/var/cache",
  "/var/lib",
  "/var/lock",
  "/var/log",
  "/var/mail",
  "/var/run",
  "/var/spool",
  "/var/tmp",
  "/vmlinuz",
  "/vmlinuz.old",
] as const;

export const HOST_PATH_MAX = 1024;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export type HostPathCheck = { ok: true; path: string } | { ok: false; reason: string };

/**
 * The lexical normal form of an absolute path (see above), or null when `raw` is not absolute.
 * Pure string work: nothing on any filesystem is looked at.
 */
export function normaliseHostPath(raw: string): string | null {
  if (!raw.startsWith("/")) return null;
  const out: string[] = [];
  for (const seg of raw.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  return `/${out.join("/")}`;
}

const within = (path: string, dir: string) => dir === "/" || path === dir || path.startsWith(`${dir}/`);

/**
 * Checks a bind mount's host path and returns its normalised form, or the reason it is refused.
 * `sensitive` adds paths of this server (the agent: its state directory and engine socket); they
 * are normalised the same way.
 */
export function checkHostPath(raw: string, sensitive: readonly string[] = []): HostPathCheck {
  if (CONTROL.test(raw)) return { ok: false, reason: "Must not contain control characters." };
  if (raw.includes(":") || raw.includes(",")) return { ok: false, reason: "Must not contain ':' or ','." };
  const path = normaliseHostPath(raw);
  if (path === null) return { ok: false, reason: "Use an absolute path (starting with /)." };
  if (path.length > HOST_PATH_MAX || raw.length > 4 * HOST_PATH_MAX) return { ok: false, reason: `Use at most ${HOST_PATH_MAX} characters.` };
  const reason = sensitiveReason(path, sensitive);
  if (reason === null) return { ok: true, path };
  // Say what the path was taken for, so a user sees why "//etc" or "/srv/../etc" is /etc.
  const shown = raw.trim();
  return { ok: false, reason: shown === path ? reason : `${shown} resolves to ${path} (repeated and trailing slashes, '.' or '..' segments resolved): ${reason}` };
}

function sensitiveReason(path: string, sensitive: readonly string[]): string | null {
  if (path === "/") return "/ is the server's root directory: it contains every system directory and cannot be mounted.";
  const extra = sensitive.map((s) => normaliseHostPath(s)).filter((s): s is string => s !== null && s !== "/");
  for (const dir of [...SENSITIVE_HOST_PATHS, ...extra]) {
    if (path === dir) return `${path} is a system directory and cannot be mounted.`;
    if (within(path, dir)) return `${path} lies inside the system directory ${dir} and cannot be mounted.`;
    if (within(dir, path)) return `${path} contains the system directory ${dir} and cannot be mounted.`;
  }
  return null;
}

/** True when checkHostPath refuses the path (kept for callers that only need yes or no). */
export function isForbiddenHostPath(path: string, sensitive: readonly string[] = []): boolean {
  return !checkHostPath(path, sensitive).ok;
}

/**
 * A bind mount's host path in API bodies and job payloads: trimmed, checked, and turned into its
 * normalised form (the form that is stored and mounted).
 */
export const HostPath = z
  .string()
  .trim()
  .min(1)
  .superRefine((v, ctx) => {
    const r = checkHostPath(v);
    if (!r.ok) ctx.addIssue({ code: "custom", message: r.reason });
  })
  .overwrite((v) => normaliseHostPath(v) ?? v);
