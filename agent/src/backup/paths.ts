import { randomBytes } from "node:crypto";
import { mkdir, realpath } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve, sep } from "node:path";

/** Backups live under `<state dir>/backups/<db uuid>/<schedule uuid>/<file>` (directories 700, files 600). */
export const backupsRoot = (stateDir: string) => join(resolve(stateDir), "backups");

/** A name that is one path segment: the payload schemas already restrict them; this is the last guard. */
function segment(value: string, what: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/.test(value) || value.includes("..")) throw new BackupPathError(`invalid ${what} ${JSON.stringify(value)}`);
  return value;
}

export class BackupPathError extends Error {
  override name = "BackupPathError";
}

export function scheduleDir(stateDir: string, dbUuid: string, scheduleUuid: string): string {
  return join(backupsRoot(stateDir), segment(dbUuid, "database uuid"), segment(scheduleUuid, "schedule uuid"));
}

/** Creates the schedule's directory (and its parents under the state dir) private to the agent's user. */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
}

/** A temporary name beside `finalPath` (same directory: the rename is atomic), hidden from retention. */
export function partialPath(finalPath: string): string {
  return join(dirname(finalPath), `.partial-${randomBytes(6).toString("hex")}`);
}

/**
 * The real path of a backup file the control plane names, refused unless it lies inside
 * `<state dir>/backups/` (also after resolving symlinks): a job payload must never make the
 * agent read or delete any other file of the server. null when the file does not exist.
 */
export async function containedBackupFile(stateDir: string, path: string): Promise<string | null> {
  if (!isAbsolute(path)) throw new BackupPathError(`backup path ${JSON.stringify(path)} is not absolute; refused`);
  const root = backupsRoot(stateDir);
  const inside = (p: string, r: string) => p.startsWith(r + sep);
  if (!inside(resolve(path), root)) throw new BackupPathError(`backup path ${JSON.stringify(path)} is outside ${root}/; refused`);
  let real: string;
  try {
    real = await realpath(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  let realRoot: string;
  try {
    realRoot = await realpath(root);
  } catch {
    realRoot = root;
  }
  if (!inside(real, realRoot)) throw new BackupPathError(`backup path ${JSON.stringify(path)} leads outside ${root}/; refused`);
  return real;
}
