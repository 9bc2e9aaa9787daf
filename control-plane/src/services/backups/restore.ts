import { DatabaseEngine, DbCredentials, type RestoreBackupBody } from "@capstan/shared";
import { lockInTransaction } from "../../db/locks.js";
import type { TeamScope } from "../../domain/scope.js";
import { NotFound, Invalid, Conflict } from "../../domain/errors.js";
import { ServerService } from "../servers.js";
import { BackupLookups, OPEN, isOpen } from "./common.js";

/** Restores of a successful backup into its database. */
export class BackupRestores {
  constructor(private readonly lookups: BackupLookups) {}

  /**
   * POST .../restore: restores the backup into its database (the agent downloads it from S3
   * when it is no longer on the server, and decrypts it). Destructive, so it needs full access.
   */
  async restore(scope: TeamScope, dbUuid: string, backupUuid: string, executionUuid: string, body: RestoreBackupBody): Promise<string> {
    const { database, execution } = await this.lookups.execution(scope, dbUuid, backupUuid, executionUuid, "manage");
    if (execution.status !== "success") throw new Conflict("Only a successful backup can be restored.");
    if (isOpen(execution.restoreStatus)) throw new Conflict("This backup is already being restored.");
    const location = await this.lookups.location(execution);
    if (location.local_path === null && location.s3 === null) {
      throw new Conflict("The backup's file is gone: it is neither on the server nor in the S3 storage (retention removed it).");
    }
    const clash = await this.lookups.restoreClash(this.lookups.db, database.id);
    if (clash) throw new Conflict(clash);
    if (!ServerService.agentConnected(database.server)) throw new Conflict(`The server ${database.server.name} is not reachable (its agent is not connected).`);

    let passphrase: string | null = null;
    if (execution.isEncrypted) {
      passphrase = body.passphrase ?? null;
      // The passphrase of the storage the backup went to (it was encrypted with that one's).
      if (passphrase === null && execution.s3StorageId !== null) passphrase = (await this.lookups.deps.storages.destinationById(execution.s3StorageId))?.passphrase ?? null;
      if (passphrase === null) {
        throw new Invalid({ passphrase: ["This backup is encrypted and its storage has no passphrase now: give the passphrase it was encrypted with."] });
      }
    }
    const full = await this.lookups.db.standaloneDatabase.findUnique({ where: { id: database.id } });
    if (!full) throw new NotFound("Database");
    const engine = DatabaseEngine.safeParse(full.engine);
    if (!engine.success) throw new Conflict(`Unknown database engine ${full.engine}.`);
    let credentials: DbCredentials;
    try {
      credentials = this.lookups.credentials(full.credentials);
    } catch (err) {
      throw new Conflict(`Cannot restore: ${(err as Error).message}.`);
    }
    // Under the database's run lock, a backup or restore claimed since the check above is seen
    // here; the restore slot is taken before anything is written, so a lost race writes nothing.
    const claimed = await this.lookups.db.$transaction(async (tx) => {
      await lockInTransaction(tx, this.lookups.deps.dialect, "databaseRuns", database.id);
      const clashNow = await this.lookups.restoreClash(tx, database.id);
      if (clashNow) return clashNow;
      const r = await tx.backupExecution.updateMany({
        where: { id: execution.id, OR: [{ restoreStatus: null }, { restoreStatus: { notIn: OPEN } }] },
        data: { restoreStatus: "queued", restoreReason: null, restoredAt: null },
      });
      if (r.count === 0) return false;
      const jobId = await this.lookups.deps.jobs.enqueue(tx, database.serverId, "db.restore", {
        db: { uuid: full.uuid, name: full.name },
        engine: engine.data,
        credentials,
        from: location,
        passphrase,
      });
      await tx.backupExecution.update({ where: { id: execution.id }, data: { restoreJobId: jobId } });
      return true;
    });
    if (claimed === false) throw new Conflict("This backup is already being restored.");
    if (typeof claimed === "string") throw new Conflict(claimed);
    this.lookups.deps.jobs.nudge(database.serverId);
    return execution.uuid;
  }
}
