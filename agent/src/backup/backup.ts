import type { DbBackupPayload, DbBackupResult } from "@capstan/shared";
import type { Engine } from "../docker/engine.js";
import { DRIVERS } from "./engines/index.js";
import { BackupToolError } from "./exec.js";
import { scheduleDir } from "./paths.js";
import { storeBackup } from "./store.js";
import { runningDbContainer } from "./target.js";

export interface BackupRunOptions {
  stateDir: string;
  pollMs: number;
}

interface Ctx {
  signal: AbortSignal;
  progress(line: string): void;
}

/**
 * db.backup: the engine's dump tool's output, stored by storeBackup (store.ts: gzip, OpenPGP
 * AEAD, the private file, S3, retention). Success also needs the tool's exit 0; when the output
 * broke because the tool failed, the tool's reason is the one given.
 */
export async function runBackup(engine: Engine, p: DbBackupPayload, opts: BackupRunOptions, ctx: Ctx): Promise<DbBackupResult> {
  const { signal, progress } = ctx;
  const container = await runningDbContainer(engine, p.db.uuid, signal);
  const driver = DRIVERS[p.engine];
  const workDir = scheduleDir(opts.stateDir, p.db.uuid, p.schedule_uuid);
  const spec = { stateDir: opts.stateDir, ownerUuid: p.db.uuid, scheduleUuid: p.schedule_uuid, filename: p.filename, keepLocally: p.keep_locally, s3: p.s3, passphrase: p.passphrase };
  return storeBackup(spec, ctx, async (write) => {
    const target = { engine, container: container.id, name: container.name, kind: p.engine, credentials: p.credentials, signal, progress, workDir, pollMs: opts.pollMs };
    progress(`dumping ${p.engine} database ${p.db.name}${p.passphrase ? " (gzip, OpenPGP encrypted)" : " (gzip)"}`);
    const src = await driver.dump(target);
    try {
      await write(src.stream);
      await src.finished();
    } catch (err) {
      if (!(err instanceof BackupToolError)) {
        src.stream.destroy();
        await src.finished().catch((toolErr: unknown) => {
          if (toolErr instanceof BackupToolError) throw toolErr;
        });
      }
      throw err;
    }
  });
}
