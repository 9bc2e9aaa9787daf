import { randomBytes } from "node:crypto";
import { type FileOwner, putPrivateFile } from "../../databases/container-files.js";
import type { Engine } from "../../docker/engine.js";
import type { DbTarget } from "./types.js";

/**
 * A dump or restore tool's credentials as a file inside the database's container, never in the
 * tool's argv (every process of the host sees it) nor in its environment (readable through
 * /proc/<pid>/environ and inherited by whatever the tool starts).
 *
 * The file is `/tmp/capstan-<process mark>-<random>/<name>`: mode 600, owned by the user `docker exec` runs the
 * tool as (asked with `id`, so an image with a non-root USER works too), in a directory of its own
 * that the engine creates as root: nothing else can be put beside it (ClickHouse's client, for
 * one, merges a `conf.d/` next to its config file). The directory is removed as root when the
 * work ended: success, failure, or cancel (the removal has its own deadline, the job's signal
 * may be the reason it ended). A removal that fails is reported, never thrown over the job's
 * own outcome. What a crashed agent process left (a 600 file in a private directory of the
 * container's /tmp) goes with the next use of a secret file in that container by a later
 * process: every directory name carries its process's mark, and the sweep removes the others'.
 */
const PARENT = "/tmp";
const REMOVE_TIMEOUT_MS = 30_000;
/** This agent process's part of its directories' names (a process's own may be in use). */
const PROCESS_MARK = randomBytes(4).toString("hex");
/**
 * Removes every /tmp/capstan-* not of the process marked $1. A constant script, the mark in
 * argv: a glob over /tmp needs a shell, and every database image has one.
 */
const SWEEP_SCRIPT = 'for d in /tmp/capstan-*; do case "$d" in "/tmp/capstan-$1-"*) ;; *) if [ -e "$d" ]; then rm -rf -- "$d"; fi ;; esac; done';

/** What putting a secret file in place needs of a database's container. */
export type SecretFileTarget = Pick<DbTarget, "engine" | "container" | "signal" | "progress">;

export interface SecretFile {
  /** File name inside the private directory (letters, digits, `.`, `_`, `-`). */
  name: string;
  content: string;
}

/** The uid and gid of processes `docker exec` starts in this container; root when `id` cannot tell. */
export async function execOwner(engine: Engine, container: string, signal: AbortSignal): Promise<FileOwner> {
  try {
    const s = await engine.execStream(container, { cmd: ["id"] }, signal);
    let out = "";
    for await (const chunk of s.stdout as AsyncIterable<Buffer>) out += chunk.toString("utf8");
    const outcome = await s.done;
    const uid = /uid=(\d+)/.exec(out)?.[1];
    const gid = /gid=(\d+)/.exec(out)?.[1];
    if (outcome.exitCode === 0 && uid !== undefined && gid !== undefined) return { uid: Number(uid), gid: Number(gid) };
  } catch (err) {
    if (signal.aborted) throw err;
  }
  // An image without `id` (Docker's default exec user is root unless the image says otherwise).
  return { uid: 0, gid: 0 };
}

/** Runs a removal as root (the directories belong to root even when the tool runs as another user); reports a failure, never throws. */
async function removeAsRoot(t: SecretFileTarget, cmd: string[], what: string): Promise<void> {
  try {
    const s = await t.engine.execStream(t.container, { cmd, user: "0" }, AbortSignal.timeout(REMOVE_TIMEOUT_MS));
    s.stdout.resume();
    const outcome = await s.done;
    if (outcome.exitCode !== 0) t.progress(`could not remove ${what} from the container (exit code ${outcome.exitCode}): ${outcome.stderr.trim()}`);
  } catch (err) {
    t.progress(`could not remove ${what} from the container: ${(err as Error).message}`);
  }
}

const removeDir = (t: SecretFileTarget, dir: string) => removeAsRoot(t, ["rm", "-rf", "--", dir], dir);

/** The private directories earlier agent processes left in this container (a crash mid-job). */
const sweepEarlierProcesses = (t: SecretFileTarget) => removeAsRoot(t, ["sh", "-c", SWEEP_SCRIPT, "sh", PROCESS_MARK], "what earlier agent processes left in /tmp");

/**
 * Puts the file in place, runs `fn` with its path, and removes it again. `holdUntil`: for a
 * dump whose tool keeps running after `fn` returned its output stream, the removal waits for
 * that promise (settled either way) and does not hold up the caller.
 */
export async function withSecretFile<T>(
  t: SecretFileTarget,
  file: SecretFile,
  fn: (path: string) => Promise<T>,
  opts: { holdUntil?: (result: T) => Promise<unknown> } = {},
): Promise<T> {
  const dir = `${PARENT}/capstan-${PROCESS_MARK}-${randomBytes(8).toString("hex")}`;
  const path = `${dir}/${file.name}`;
  let result: T;
  if (!t.signal.aborted) await sweepEarlierProcesses(t);
  try {
    const owner = await execOwner(t.engine, t.container, t.signal);
    await putPrivateFile(t.engine, t.container, PARENT, path.slice(PARENT.length + 1), Buffer.from(file.content, "utf8"), owner, t.signal);
    result = await fn(path);
  } catch (err) {
    // Also when the copy itself failed or was cancelled midway: part of the file may be there.
    await removeDir(t, dir);
    throw err;
  }
  if (opts.holdUntil) void opts.holdUntil(result).then(() => undefined, () => undefined).then(() => removeDir(t, dir));
  else await removeDir(t, dir);
  return result;
}
