import { finished } from "node:stream/promises";
import type { DbCredentials } from "@capstan/shared";
import type { ExecSpec } from "../../docker/engine.js";
import { type DumpSource, execDump, execFeed } from "../exec.js";
import { type SecretFile, withSecretFile } from "./secret-file.js";
import type { BackupDriver } from "./types.js";

/**
 * MongoDB: `mongodump --archive` of every database, restored with `mongorestore --archive
 * --drop` (each collection of the archive replaces its namesake). The database tools read no
 * password variable, and argv is visible to every process of the host: the password goes into
 * a YAML config file (`--config`, see secret-file.ts) that is removed again when the tool ended.
 */
function authArgs(c: DbCredentials, configPath: string): string[] {
  return ["--host=127.0.0.1", "--port=27017", `--username=${c.user ?? "root"}`, "--authenticationDatabase=admin", `--config=${configPath}`];
}

/** A JSON string is a valid YAML double-quoted scalar: any password stays one value. */
export const mongoConfig = (c: DbCredentials): SecretFile => ({ name: "mongo.yaml", content: `password: ${JSON.stringify(c.password)}\n` });

export const mongodbDriver: BackupDriver = {
  dump: (t) =>
    withSecretFile<DumpSource>(
      t,
      mongoConfig(t.credentials),
      (path) => {
        const spec: ExecSpec = { cmd: ["mongodump", "--archive", "--quiet", ...authArgs(t.credentials, path)] };
        return execDump(t.engine, t.container, spec, t.signal);
      },
      // the file must exist until the dump connected: it goes when the output stream ended
      { holdUntil: (src) => finished(src.stream) },
    ),
  restore: (t, plain) =>
    withSecretFile(t, mongoConfig(t.credentials), (path) =>
      execFeed(t.engine, t.container, { cmd: ["mongorestore", "--archive", "--drop", "--quiet", ...authArgs(t.credentials, path)] }, plain, t.signal),
    ),
};
