import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

export const TMP_SUFFIX = ".tmp";

/**
 * Writes a file so that a reader (or the agent after a crash or power loss) sees either the
 * old content or the new one, never a torn write: temp file in the same directory, fsync,
 * rename over the target, fsync the directory.
 */
export async function writeFileAtomic(file: string, data: string, mode = 0o600): Promise<void> {
  const dir = dirname(file);
  const tmp = join(dir, `.${basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}${TMP_SUFFIX}`);
  try {
    const fh = await open(tmp, "w", mode);
    try {
      await fh.writeFile(data, "utf8");
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => {});
    throw err;
  }
  await syncDir(dir);
}

async function syncDir(dir: string): Promise<void> {
  try {
    const fh = await open(dir, "r");
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {
    // Some filesystems refuse fsync on a directory; the rename is still atomic.
  }
}
