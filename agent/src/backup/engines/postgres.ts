import { finished } from "node:stream/promises";
import type { DbCredentials } from "@capstan/shared";
import { BackupToolError, type DumpSource, execDump, execFeed } from "../exec.js";
import { withSecretFile } from "./secret-file.js";
import type { BackupDriver, DbTarget } from "./types.js";

/**
 * PostgreSQL: a plain SQL dump (`pg_dump --clean --if-exists`) restored with psql in one
 * transaction that stops at the first error, so a failed restore leaves the database as it was.
 * Everything that names the connection goes through libpq's variables: nothing of it is in
 * argv, and a database name is never read as a connection string (as `--dbname=` would).
 * TCP to 127.0.0.1 (the health check's path) so the password is checked where the server asks.
 * The password is in a password file (secret-file.ts; libpq ignores one readable by group or
 * others), named by PGPASSFILE: a path, not a secret.
 */
function env(c: DbCredentials, passfile: string): Record<string, string> {
  const user = c.user ?? "postgres";
  return { PGHOST: "127.0.0.1", PGPORT: "5432", PGUSER: user, PGDATABASE: c.database ?? user, PGPASSFILE: passfile, PGCONNECT_TIMEOUT: "30" };
}

/**
 * One `host:port:database:user:password` line matching any connection (the file serves one tool
 * run). libpq takes `\` as the escape of `:` and `\` inside a field; a line cannot hold a newline.
 */
export function pgpassLine(password: string): string {
  if (/[\r\n]/.test(password)) throw new BackupToolError("the password contains a line break, which a PostgreSQL password file cannot hold");
  return `*:*:*:*:${password.replace(/[\\:]/g, "\\$&")}\n`;
}

const passfile = (t: DbTarget) => ({ name: "pgpass", content: pgpassLine(t.credentials.password) });

export const postgresDriver: BackupDriver = {
  dump: (t) =>
    withSecretFile<DumpSource>(
      t,
      passfile(t),
      (path) => execDump(t.engine, t.container, { cmd: ["pg_dump", "--clean", "--if-exists", "--no-password"], env: env(t.credentials, path) }, t.signal),
      // pg_dump reads the file when it connects, which may be after its output stream was handed on.
      { holdUntil: (src) => finished(src.stream) },
    ),
  restore: (t, plain) =>
    withSecretFile(t, passfile(t), (path) =>
      execFeed(
        t.engine,
        t.container,
        {
          cmd: ["psql", "--no-psqlrc", "--no-password", "--quiet", "--single-transaction", "--set=ON_ERROR_STOP=1", "--output=/dev/null"],
          env: env(t.credentials, path),
        },
        plain,
        t.signal,
      ),
    ),
  // Ends a COPY block if one is open, then a statement that fails: ON_ERROR_STOP rolls back.
  abortInput: Buffer.from("\n\\.\n;CAPSTAN RESTORE INPUT FAILED;\n"),
};
