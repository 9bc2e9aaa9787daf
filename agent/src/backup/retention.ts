import { readdir, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { DATABASE_ENGINES, type S3Target } from "@capstan/shared";
import { deleteS3, listS3 } from "@capstan/shared/s3";

/**
 * Names the control plane gives backups: `<engine>-<UTC yyyymmddThhmmssZ>-<8 of the execution>.<ext>`
 * (resource backups: `volume-...`, and (w8/rbconfig) `configuration-...`, `full-...`).
 * Retention only ever removes files and objects named like this: anything else a user keeps
 * beside them (or the connection test's objects) is left alone.
 */
const BACKUP_NAME = new RegExp(`^(${[...DATABASE_ENGINES, "volume", "configuration", "full"].join("|")})-\\d{8}T\\d{6}Z-[a-z0-9-]{1,64}\\.[A-Za-z0-9.]+$`);
export const isBackupName = (name: string) => BACKUP_NAME.test(name);

interface Candidate {
  id: string;
  name: string;
  time: number;
}

/** Newest first (by time, then by name: the names start with the UTC time stamp), the current run always kept first. */
function keepNewest<T extends Candidate>(all: T[], keep: number, currentId: string | null): { kept: T[]; removed: T[] } {
  const sorted = [...all].sort((a, b) => b.time - a.time || (a.name < b.name ? 1 : a.name > b.name ? -1 : 0));
  const current = sorted.filter((c) => c.id === currentId);
  const ordered = [...current, ...sorted.filter((c) => c.id !== currentId)];
  return { kept: ordered.slice(0, keep), removed: ordered.slice(keep) };
}

/**
 * Keeps the newest `keep` backup files of one schedule's directory and removes the rest.
 * `current` (the file this run wrote) is kept unless keep is 0 and `currentMayGo` (it has a copy
 * in S3). Returns the removed paths other than the current one, and whether the current one went:
 * only files that are really gone. A file that cannot be removed is given to `onError` and the
 * others are still removed (without `onError`, the error is thrown there).
 */
export async function applyLocalRetention(
  dir: string,
  keep: number,
  current: string,
  currentMayGo: boolean,
  onError?: (path: string, err: Error) => void,
): Promise<{ removed: string[]; currentRemoved: boolean }> {
  const names = (await readdir(dir, { withFileTypes: true })).filter((d) => d.isFile() && isBackupName(d.name)).map((d) => d.name);
  const files: Candidate[] = [];
  for (const name of names) {
    try {
      files.push({ id: join(dir, name), name, time: (await stat(join(dir, name))).mtimeMs });
    } catch {
      // removed meanwhile
    }
  }
  const effectiveKeep = keep === 0 && !currentMayGo ? 1 : keep;
  const { removed } = keepNewest(files, effectiveKeep, current);
  const out: string[] = [];
  let currentRemoved = false;
  for (const f of removed) {
    try {
      await unlink(f.id);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        if (!onError) throw err;
        onError(f.id, err as Error);
        continue;
      }
    }
    if (f.id === current) currentRemoved = true;
    else out.push(f.id);
  }
  return { removed: out, currentRemoved };
}

/** Keeps the newest `keep` backups under `prefix` (directly under it) in S3, the current object always among them. */
export async function applyRemoteRetention(target: S3Target, prefix: string, keep: number, currentKey: string): Promise<string[]> {
  const objects = (await listS3(target, prefix))
    .filter((o) => {
      const rest = o.key.slice(prefix.length);
      return o.key.startsWith(prefix) && !rest.includes("/") && isBackupName(rest);
    })
    .map((o) => ({ id: o.key, name: o.key.slice(prefix.length), time: o.lastModified.getTime() }));
  const { removed } = keepNewest(objects, Math.max(1, keep), currentKey);
  const keys = removed.map((o) => o.id);
  await deleteS3(target, keys);
  return keys;
}
