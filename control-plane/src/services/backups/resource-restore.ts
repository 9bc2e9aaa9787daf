import { ResourceJobBackupType, hasConfiguration, hasVolumes, type RestoreResourceBackupBody, type ResourceRestorePayload } from "@capstan/shared";
import type { Db, Prisma } from "../../db/client.js";
import { lockInTransaction } from "../../db/locks.js";
import type { TeamScope } from "../../domain/scope.js";
import { Conflict, Invalid, NotFound } from "../../domain/errors.js";
import { ServerService } from "../servers.js";
import { BackupLookups, OPEN, isOpen } from "./common.js";
import { mayAddBindMounts } from "./configuration.js";

// ---- resource restores (issue 19, w7/restore) ----

/** Deployments of an application that are not over yet. */
const OPEN_DEPLOYMENTS = ["queued", "in_progress"];

/**
 * Why a volume restore into the application cannot start now (null: it can): a deployment of it,
 * or a backup or restore of any of its resource backups, is open. Also what a resource backup
 * run checks for restores (resources.ts), so that neither starts while the other runs.
 */
export async function applicationRunClash(db: Db | Prisma.TransactionClient, applicationId: number): Promise<string | null> {
  if (await db.backupExecution.count({ where: { schedule: { applicationId }, restoreStatus: { in: OPEN } } })) return "a restore of this application is running";
  if (await db.backupExecution.count({ where: { schedule: { applicationId }, status: { in: OPEN } } })) return "a backup of this application is running; restore once it has ended";
  if (await db.deployment.count({ where: { applicationId, status: { in: OPEN_DEPLOYMENTS } } })) return "a deployment of this application is running; restore once it has ended";
  return null;
}

/**
 * POST /resource-backups/{id}/executions/{execution_id}/restore: a successful volume backup
 * restored into its own application by a resource.restore job (the agent checks the archive in
 * staging before it stops anything; docs/resource-backups.md). The restore slot on the execution
 * and the job are written in one transaction under the application's run lock, as database
 * restores do (restore.ts).
 */
export class ResourceRestores {
  constructor(private readonly lookups: BackupLookups) {}

  private get db() {
    return this.lookups.db;
  }

  async restore(scope: TeamScope, backupId: number, executionId: number, body: RestoreResourceBackupBody): Promise<{ executionId: number; restoreStatus: "queued" }> {
    if (body.target_uuid !== undefined) {
      throw new Invalid({ target_uuid: ["Restoring into another resource is not supported yet: a restore goes into the backup's own application (omit target_uuid)."] });
    }
    const schedule = await this.db.backupSchedule.findFirst({ where: { id: backupId, teamId: scope.teamId, backupType: { not: null } }, select: { id: true, applicationId: true, backupType: true } });
    const found = schedule?.applicationId != null ? await this.db.application.findUnique({ where: { id: schedule.applicationId }, select: { uuid: true } }) : null;
    if (!schedule || !found) throw new NotFound("Resource backup");
    try {
      await scope.application(found.uuid, "manage");
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound("Resource backup");
      throw err;
    }
    const execution = await this.db.backupExecution.findFirst({ where: { id: executionId, scheduleId: schedule.id } });
    if (!execution) throw new NotFound("Backup execution");
    if (execution.status !== "success") throw new Conflict(`Only a successful backup can be restored; this execution is ${execution.status}.`);
    if (isOpen(execution.restoreStatus)) throw new Conflict("This backup is already being restored.");
    const location = await this.lookups.location(execution);
    if (location.local_path === null && location.s3 === null) {
      throw new Conflict("The backup's file is gone: it is neither on the server nor in the S3 storage (retention removed it).");
    }
    const app = await this.db.application.findUnique({
      where: { uuid: found.uuid },
      select: { id: true, uuid: true, name: true, serverId: true, server: { select: { name: true, status: true } }, volumes: { orderBy: { id: "asc" }, select: { name: true, mountPath: true } } },
    });
    if (!app) throw new NotFound("Resource backup");
    const clash = await applicationRunClash(this.db, app.id);
    if (clash) throw new Conflict(`Cannot restore now: ${clash}.`);
    if (!ServerService.agentConnected(app.server)) throw new Conflict(`Cannot restore now: the server ${app.server.name} is not reachable (its agent is not connected).`);
    // (w8/rbconfig) configuration and full restores: the backup's type decides what the job brings back.
    const backupType = ResourceJobBackupType.parse(schedule.backupType);
    if (hasVolumes(backupType) && !app.volumes.length) throw new Conflict(`Cannot restore now: the application ${app.name} has no persistent storages.`);

    let passphrase: string | null = null;
    if (execution.isEncrypted) {
      passphrase = body.passphrase ?? null;
      if (passphrase === null && execution.s3StorageId !== null) passphrase = (await this.lookups.deps.storages.destinationById(execution.s3StorageId))?.passphrase ?? null;
      if (passphrase === null) throw new Invalid({ passphrase: ["This backup is encrypted and its storage has no passphrase now: give the passphrase it was encrypted with."] });
    }
    const payload: ResourceRestorePayload = {
      resource: { kind: "application", uuid: app.uuid, name: app.name },
      volumes: app.volumes.map((v) => ({ name: v.name, mount_path: v.mountPath })),
      execution_uuid: execution.uuid,
      from: location,
      passphrase,
      backup_type: backupType,
      apply: hasConfiguration(backupType) ? { may_add_bind_mounts: await mayAddBindMounts(this.db, scope) } : null,
    };
    const claimed = await this.db.$transaction(async (tx) => {
      await lockInTransaction(tx, this.lookups.deps.dialect, "applicationRuns", app.id);
      const clashNow = await applicationRunClash(tx, app.id);
      if (clashNow) return clashNow;
      const r = await tx.backupExecution.updateMany({
        where: { id: execution.id, status: "success", OR: [{ restoreStatus: null }, { restoreStatus: { notIn: OPEN } }] },
        data: { restoreStatus: "queued", restoreReason: null, restoredAt: null },
      });
      if (r.count === 0) return false;
      const jobId = await this.lookups.deps.jobs.enqueue(tx, app.serverId, "resource.restore", payload);
      await tx.backupExecution.update({ where: { id: execution.id }, data: { restoreJobId: jobId } });
      return true;
    });
    if (claimed === false) throw new Conflict("This backup is already being restored.");
    if (typeof claimed === "string") throw new Conflict(`Cannot restore now: ${claimed}.`);
    this.lookups.deps.jobs.nudge(app.serverId);
    return { executionId: execution.id, restoreStatus: "queued" };
  }
}
