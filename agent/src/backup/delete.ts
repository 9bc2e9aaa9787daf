import { unlink } from "node:fs/promises";
import type { BackupLocation } from "@capstan/shared";
import { deleteS3 } from "@capstan/shared/s3";
import { containedBackupFile } from "./paths.js";

/** backup.delete: the file on this server (only inside the backups dir) and/or the S3 object; gone already counts as removed. */
export async function deleteBackup(stateDir: string, from: BackupLocation, progress: (l: string) => void): Promise<{ local_removed: boolean; remote_removed: boolean }> {
  let localRemoved = false;
  if (from.local_path) {
    const real = await containedBackupFile(stateDir, from.local_path);
    if (real) {
      try {
        await unlink(real);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
      progress(`removed ${real}`);
    } else progress(`${from.local_path} was already gone`);
    localRemoved = true;
  }
  let remoteRemoved = false;
  if (from.s3) {
    await deleteS3(from.s3.target, [from.s3.key]);
    progress(`removed S3 object ${from.s3.key}`);
    remoteRemoved = true;
  }
  return { local_removed: localRemoved, remote_removed: remoteRemoved };
}
