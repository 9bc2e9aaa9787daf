import type { DbCredentials } from "@capstan/shared";
import { BackupToolError, execDump, execFeed } from "../exec.js";
import type { BackupDriver } from "./types.js";

/**
 * MySQL / MariaDB: `mysqldump` / `mariadb-dump` of the one database (`--databases` writes its
 * CREATE DATABASE IF NOT EXISTS and USE, and DROP TABLE IF EXISTS before each table), consistent
 * through `--single-transaction` (InnoDB), with routines, events and triggers; restored with the
 * matching client. As root when a root password exists (events and routines need more than the
 * database's user may have). The password travels in MYSQL_PWD (the exec's environment, never
 * argv), which both families' clients read (MySQL marks it deprecated, still honoured in 8.4).
 * DDL commits on its own in MySQL: a restore that fails midway leaves what it had applied.
 */
function conn(c: DbCredentials): { args: string[]; env: Record<string, string> } {
  const user = c.root_password ? "root" : (c.user ?? "root");
  return {
    args: ["--protocol=TCP", "--host=127.0.0.1", "--port=3306", `--user=${user}`],
    env: { MYSQL_PWD: c.root_password ?? c.password },
  };
}

function database(c: DbCredentials): string {
  if (!c.database) throw new BackupToolError("this database has no database name to dump (credentials.database is empty)");
  // A name is a positional argument: one starting with "-" would be read as an option.
  if (c.database.startsWith("-")) throw new BackupToolError(`database name ${JSON.stringify(c.database)} starts with "-"; refusing to pass it to the dump tool`);
  return c.database;
}

function driver(dumpTool: string, client: string): BackupDriver {
  return {
    dump: async (t) => {
      const { args, env } = conn(t.credentials);
      const db = database(t.credentials);
      return execDump(
        t.engine,
        t.container,
        { cmd: [dumpTool, ...args, "--single-transaction", "--routines", "--events", "--triggers", "--hex-blob", "--databases", db], env },
        t.signal,
      );
    },
    restore: async (t, plain) => {
      const { args, env } = conn(t.credentials);
      await execFeed(t.engine, t.container, { cmd: [client, ...args, "--binary-mode"], env }, plain, t.signal);
    },
    // A statement that fails: the client stops at the first error (no --force).
    abortInput: Buffer.from("\n;CAPSTAN RESTORE INPUT FAILED;\n"),
  };
}

export const mysqlDriver = driver("mysqldump", "mysql");
export const mariadbDriver = driver("mariadb-dump", "mariadb");
