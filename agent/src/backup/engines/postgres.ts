import type { DbCredentials } from "@capstan/shared";
import { execDump, execFeed } from "../exec.js";
import type { BackupDriver } from "./types.js";

/**
 * PostgreSQL: a plain SQL dump (`pg_dump --clean --if-exists`) restored with psql in one
 * transaction that stops at the first error, so a failed restore leaves the database as it was.
 * Everything that names the connection goes through libpq's variables: nothing of it is in
 * argv, and a database name is never read as a connection string (as `--dbname=` would).
 * TCP to 127.0.0.1 (the health check's path) so the password is checked where the server asks.
 */
function env(c: DbCredentials): Record<string, string> {
  const user = c.user ?? "postgres";
  return { PGHOST: "127.0.0.1", PGPORT: "5432", PGUSER: user, PGDATABASE: c.database ?? user, PGPASSWORD: c.password, PGCONNECT_TIMEOUT: "30" };
}

export const postgresDriver: BackupDriver = {
  dump: (t) => execDump(t.engine, t.container, { cmd: ["pg_dump", "--clean", "--if-exists", "--no-password"], env: env(t.credentials) }, t.signal),
  restore: (t, plain) =>
    execFeed(
      t.engine,
      t.container,
      {
        cmd: ["psql", "--no-psqlrc", "--no-password", "--quiet", "--single-transaction", "--set=ON_ERROR_STOP=1", "--output=/dev/null"],
        env: env(t.credentials),
      },
      plain,
      t.signal,
    ),
  // Ends a COPY block if one is open, then a statement that fails: ON_ERROR_STOP rolls back.
  abortInput: Buffer.from("\n\\.\n;CAPSTAN RESTORE INPUT FAILED;\n"),
};
