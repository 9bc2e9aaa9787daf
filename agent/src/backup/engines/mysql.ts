import { finished } from "node:stream/promises";
import type { DbCredentials } from "@capstan/shared";
import { BackupToolError, type DumpSource, execDump, execFeed } from "../exec.js";
import { type SecretFile, withSecretFile } from "./secret-file.js";
import type { BackupDriver } from "./types.js";

/**
 * MySQL / MariaDB: `mysqldump` / `mariadb-dump` of the one database (`--databases` writes its
 * CREATE DATABASE IF NOT EXISTS and USE, and DROP TABLE IF EXISTS before each table), consistent
 * through `--single-transaction` (InnoDB), with routines, events and triggers; restored with the
 * matching client. As root when a root password exists (events and routines need more than the
 * database's user may have). The password is in an option file (`[client] password=...`, see
 * secret-file.ts) named by `--defaults-extra-file=`, which both families' tools accept only as
 * their first option; it is read after the global option files, so its password wins over any
 * there (only the tool user's own ~/.my.cnf, read later still, could override it).
 * DDL commits on its own in MySQL: a restore that fails midway leaves what it had applied.
 */
const CONNECTION = ["--protocol=TCP", "--host=127.0.0.1", "--port=3306"];

const userOf = (c: DbCredentials) => (c.root_password ? "root" : (c.user ?? "root"));

/**
 * An option value in double quotes, escaped the way both families' option-file readers undo it
 * (`\\`, `\"`, `\'`, `\n`, `\r`, `\t`, `\b`): inside the quotes `#` does not start a comment, and
 * leading or trailing spaces stay.
 */
export function optionValue(value: string): string {
  const escapes: Record<string, string> = { "\\": "\\\\", '"': '\\"', "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b" };
  return `"${value.replace(/[\\"'\n\r\t\b]/g, (ch) => escapes[ch]!)}"`;
}

export function optionFile(c: DbCredentials): SecretFile {
  return { name: "client.cnf", content: `[client]\npassword=${optionValue(c.root_password ?? c.password)}\n` };
}

function database(c: DbCredentials): string {
  if (!c.database) throw new BackupToolError("this database has no database name to dump (credentials.database is empty)");
  // A name is a positional argument: one starting with "-" would be read as an option.
  if (c.database.startsWith("-")) throw new BackupToolError(`database name ${JSON.stringify(c.database)} starts with "-"; refusing to pass it to the dump tool`);
  return c.database;
}

function driver(dumpTool: string, client: string): BackupDriver {
  const args = (c: DbCredentials, path: string) => [`--defaults-extra-file=${path}`, ...CONNECTION, `--user=${userOf(c)}`];
  return {
    dump: async (t) => {
      const db = database(t.credentials);
      return withSecretFile<DumpSource>(
        t,
        optionFile(t.credentials),
        (path) =>
          execDump(
            t.engine,
            t.container,
            { cmd: [dumpTool, ...args(t.credentials, path), "--single-transaction", "--routines", "--events", "--triggers", "--hex-blob", "--databases", db] },
            t.signal,
          ),
        { holdUntil: (src) => finished(src.stream) },
      );
    },
    restore: (t, plain) =>
      withSecretFile(t, optionFile(t.credentials), (path) =>
        execFeed(t.engine, t.container, { cmd: [client, ...args(t.credentials, path), "--binary-mode"] }, plain, t.signal),
      ),
    // A statement that fails: the client stops at the first error (no --force).
    abortInput: Buffer.from("\n;CAPSTAN RESTORE INPUT FAILED;\n"),
  };
}

export const mysqlDriver = driver("mysqldump", "mysql");
export const mariadbDriver = driver("mariadb-dump", "mariadb");
