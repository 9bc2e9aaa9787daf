import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from "node:fs";

/**
 * The data directory and its files (the SQLite database with its -wal and -shm, the instance
 * key) hold every secret of the instance: only the user the control plane runs as may read
 * them. Directories are 0700, files 0600 (issue 15).
 *
 * SQLite creates a new database with the process's default mode (0644 under the usual umask),
 * and its -wal and -shm files with the mode of the database file, so creating the database
 * file ourselves, empty and 0600, before SQLite opens it keeps all three private.
 *
 * Files an earlier release created with wider modes are narrowed at start (only "group" and
 * "other" bits are taken away): they are the instance's own. An existing directory is left as
 * it is: the data directory may be one the operator made on purpose (a mounted volume), and the
 * directory of a `DATABASE_URL=file:` database may be shared with anything.
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

function narrow(path: string, mode: number): void {
  const current = statSync(path).mode & 0o777;
  if (current & 0o077) chmodSync(path, current & mode);
}

/** Creates the directory (and missing parents) 0700; an existing one is left alone (see above). */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
}

/** Creates an empty file 0600 if it does not exist, or narrows an existing one to its owner. */
export function ensurePrivateFile(file: string): void {
  if (!existsSync(file)) {
    try {
      closeSync(openSync(file, "wx", PRIVATE_FILE_MODE));
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
  narrow(file, PRIVATE_FILE_MODE);
}

/** The SQLite database file and the -wal/-shm files SQLite keeps beside it, where they exist. */
export function ensurePrivateSqlite(file: string): void {
  ensurePrivateFile(file);
  for (const extra of [`${file}-wal`, `${file}-shm`, `${file}-journal`]) {
    if (existsSync(extra)) narrow(extra, PRIVATE_FILE_MODE);
  }
}
