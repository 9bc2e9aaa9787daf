import type { DbCredentials, S3Target } from "@capstan/shared";
import { runBackup } from "../backup/backup.js";
import { deleteBackup } from "../backup/delete.js";
import { runRestore } from "../backup/restore.js";
import { runVolumeBackup } from "../backup/volumes.js";
import { runVolumeRestore } from "../backup/volume-restore.js";
import type { Handler, JobContext } from "../dispatch/types.js";
import type { Engine } from "../docker/engine.js";
import { createMasker, type Masker } from "../deploy/mask.js";
import { appLockKey } from "./app-deploy.js";
import { dbLockKey } from "./db.js";
import type { KeyedMutex } from "../mutex.js";

/** Options of the backup handlers. */
export interface BackupOptions {
  /** The agent's state dir: backups are kept under `<stateDir>/backups/`. */
  stateDir: string;
  /** How often a database restarted by a restore (Redis-like engines) is polled for health. */
  pollMs: number;
  /** (resource restores, w7/restore) the image of resource.restore's helper container; null: none */
  helperImage?: () => Promise<string | null>;
  extraLabels?: Record<string, string>;
}

/** The values no job output or failure may show. */
function secrets(c: DbCredentials | null, passphrase: string | null, ...targets: (S3Target | null | undefined)[]): string[] {
  const out: string[] = [];
  if (c) out.push(c.password, ...(c.root_password ? [c.root_password] : []));
  if (passphrase) out.push(passphrase);
  for (const t of targets) if (t) out.push(t.secret_key);
  return out;
}

/** Runs fn with progress lines and the failure's message masked. */
async function masked<T>(mask: Masker, ctx: JobContext, fn: (ctx: JobContext) => Promise<T>): Promise<T> {
  const job: JobContext = { ...ctx, progress: (line) => ctx.progress(mask(line)) };
  try {
    return await fn(job);
  } catch (err) {
    if (err instanceof Error) {
      err.message = mask(err.message);
      throw err;
    }
    throw new Error(mask(String(err)));
  }
}

/** db.backup (backup/backup.ts); one run per schedule at a time, so retention never races itself. */
export function dbBackup(engine: Engine, opts: BackupOptions, locks: KeyedMutex): Handler<"db.backup"> {
  return (payload, ctx) =>
    locks.run(`backup:${payload.db.uuid}:${payload.schedule_uuid}`, () => {
      ctx.signal.throwIfAborted();
      const mask = createMasker(secrets(payload.credentials, payload.passphrase, payload.s3?.target));
      return masked(mask, ctx, (job) => runBackup(engine, payload, opts, job));
    });
}

/** db.restore (backup/restore.ts); holds the database's lock: no deploy or stop/start interleaves. */
export function dbRestore(engine: Engine, opts: BackupOptions, locks: KeyedMutex): Handler<"db.restore"> {
  return (payload, ctx) =>
    locks.run(dbLockKey(payload.db.uuid), () => {
      ctx.signal.throwIfAborted();
      const mask = createMasker(secrets(payload.credentials, payload.passphrase, payload.from.s3?.target));
      return masked(mask, ctx, (job) => runRestore(engine, payload, opts, job));
    });
}

/** backup.delete (backup/delete.ts). */
export function backupDelete(_engine: Engine, opts: BackupOptions): Handler<"backup.delete"> {
  return (payload, ctx) => {
    const mask = createMasker(secrets(null, null, payload.s3?.target));
    return masked(mask, ctx, (job) => deleteBackup(opts.stateDir, payload, job.progress));
  };
}

// resource backups (issue 19)
/** w8/rbsources: the lock a resource's own jobs hold (a service's are its service.* jobs' app lock, a database's its db.* jobs'). */
const resourceLockKey = (r: { kind: "application" | "service" | "database"; uuid: string }) => (r.kind === "database" ? dbLockKey(r.uuid) : appLockKey(r.uuid));

/**
 * resource.backup (backup/volumes.ts); one run per schedule at a time, as db.backup. With
 * stop_during_backup it also holds the application's lock: no deploy or stop/start interleaves
 * with the stop, the archive and the start again.
 */
export function resourceBackup(engine: Engine, opts: BackupOptions, locks: KeyedMutex): Handler<"resource.backup"> {
  return (payload, ctx) =>
    locks.run(`backup:${payload.resource.uuid}:${payload.schedule_uuid}`, () => {
      ctx.signal.throwIfAborted();
      const mask = createMasker(secrets(null, payload.passphrase, payload.s3?.target));
      const run = () => masked(mask, ctx, (job) => runVolumeBackup(engine, payload, opts, job));
      return payload.stop_during_backup ? locks.run(resourceLockKey(payload.resource), run) : run();
    });
}

// ---- resource restores (issue 19, w7/restore) ----
/**
 * resource.restore (backup/volume-restore.ts); holds the application's lock for the whole run: no
 * deploy, stop or start interleaves with the check, the stop, the swap and the start again.
 */
export function resourceRestore(engine: Engine, opts: BackupOptions, locks: KeyedMutex): Handler<"resource.restore"> {
  return (payload, ctx) =>
    locks.run(resourceLockKey(payload.resource), () => {
      ctx.signal.throwIfAborted();
      const mask = createMasker(secrets(null, payload.passphrase, payload.from.s3?.target));
      const helperImage = opts.helperImage ?? (async () => null);
      return masked(mask, ctx, (job) => runVolumeRestore(engine, payload, { stateDir: opts.stateDir, helperImage, extraLabels: opts.extraLabels, pollMs: opts.pollMs }, job));
    });
}
