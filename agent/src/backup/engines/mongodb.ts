import { randomBytes } from "node:crypto";
import type { DbCredentials } from "@capstan/shared";
import type { ExecSpec } from "../../docker/engine.js";
import { execCollect, execDump, execFeed, type DumpSource } from "../exec.js";
import type { BackupDriver, DbTarget } from "./types.js";

/**
 * MongoDB: `mongodump --archive` of every database, restored with `mongorestore --archive
 * --drop` (each collection of the archive replaces its namesake). The database tools read no
 * password variable, and argv is visible to every process of the host: the password goes into
 * a YAML config file (`--config`, mode 600, owner root, in the container's /tmp) that is removed
 * again when the tool ended.
 */
const CONFIG_DIR = "/tmp";

function authArgs(c: DbCredentials, configPath: string): string[] {
  return ["--host=127.0.0.1", "--port=27017", `--username=${c.user ?? "root"}`, "--authenticationDatabase=admin", `--config=${configPath}`];
}

/** Writes the config file, runs `fn`, and removes the file whatever happened. */
async function withConfig<T>(t: DbTarget, fn: (path: string) => Promise<T>, keepUntil?: (result: T) => Promise<unknown>): Promise<T> {
  const name = `capstan-mongo-${randomBytes(8).toString("hex")}.yaml`;
  const path = `${CONFIG_DIR}/${name}`;
  // A JSON string is a valid YAML double-quoted scalar: any password stays one value.
  await t.engine.putFile(t.container, CONFIG_DIR, name, Buffer.from(`password: ${JSON.stringify(t.credentials.password)}\n`), t.signal, 0o600);
  const remove = () => execCollect(t.engine, t.container, { cmd: ["rm", "-f", "--", path] }, AbortSignal.timeout(30_000)).catch(() => undefined);
  let result: T;
  try {
    result = await fn(path);
  } catch (err) {
    await remove();
    throw err;
  }
  if (keepUntil) void keepUntil(result).catch(() => undefined).finally(remove);
  else await remove();
  return result;
}

export const mongodbDriver: BackupDriver = {
  dump: (t) =>
    withConfig<DumpSource>(
      t,
      async (path) => {
        const spec: ExecSpec = { cmd: ["mongodump", "--archive", "--quiet", ...authArgs(t.credentials, path)] };
        return execDump(t.engine, t.container, spec, t.signal);
      },
      // the file must exist until the dump connected and ended
      (src) => src.finished(),
    ),
  restore: (t, plain) =>
    withConfig(t, (path) => execFeed(t.engine, t.container, { cmd: ["mongorestore", "--archive", "--drop", "--quiet", ...authArgs(t.credentials, path)] }, plain, t.signal)),
};
