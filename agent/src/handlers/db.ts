import type { DbCredentials } from "@capstan/shared";
import type { Handler } from "../dispatch/types.js";
import type { Engine } from "../docker/engine.js";
import { databaseAction } from "../databases/actions.js";
import { type DbOptions, deployDatabase } from "../databases/deploy.js";
import { DB_STOP_TIMEOUT_S, PUBLIC_HOST_IP } from "../databases/spec.js";
import { createMasker, maskError } from "../deploy/mask.js";
import type { KeyedMutex } from "../mutex.js";

/** Options of the db.* handlers (besides HandlerOptions.extraLabels). */
export interface DbHandlerOptions {
  db?: Partial<Omit<DbOptions, "extraLabels">>;
}

export function resolveDbOptions(opts: DbHandlerOptions & { extraLabels?: Record<string, string> }): DbOptions {
  return {
    extraLabels: opts.extraLabels ?? {},
    publicHostIp: opts.db?.publicHostIp ?? PUBLIC_HOST_IP,
    pollMs: opts.db?.pollMs ?? 100,
    stopTimeoutS: opts.db?.stopTimeoutS ?? DB_STOP_TIMEOUT_S,
    cleanupTimeoutMs: opts.db?.cleanupTimeoutMs ?? 60_000,
  };
}

/** One database's jobs run one at a time (a deploy and a stop never interleave). */
export const dbLockKey = (uuid: string) => `db:${uuid}`;

const secretsOf = (c: DbCredentials, env: Record<string, string>) => [c.password, ...(c.root_password ? [c.root_password] : []), ...Object.values(env)];

/** db.deploy: the database's container, recreated in place on its volume, healthy (databases/deploy.ts). */
export function dbDeploy(engine: Engine, opts: DbOptions, locks: KeyedMutex): Handler<"db.deploy"> {
  return (payload, ctx) => {
    const mask = createMasker(secretsOf(payload.credentials, payload.env));
    const job = { ...ctx, progress: (line: string) => ctx.progress(mask(line)) };
    return locks.run(dbLockKey(payload.db.uuid), async () => {
      job.signal.throwIfAborted(); // cancelled while waiting for the lock
      try {
        return await deployDatabase(engine, payload, opts, job);
      } catch (err) {
        throw maskError(err, mask);
      }
    });
  };
}

/** db.action: start / stop / restart / remove (databases/actions.ts). */
export function dbAction(engine: Engine, opts: DbOptions, locks: KeyedMutex): Handler<"db.action"> {
  return (payload, ctx) =>
    locks.run(dbLockKey(payload.db.uuid), async () => {
      ctx.signal.throwIfAborted();
      return databaseAction(engine, payload, opts, ctx);
    });
}
