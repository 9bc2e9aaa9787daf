import { ResourceJobBackupType, hasConfiguration, hasVolumes, type RestoreResourceBackupBody, type ResourceRestorePayload } from "@capstan/shared";
import { lockInTransaction } from "../../db/locks.js";
import type { TeamScope } from "../../domain/scope.js";
import { Conflict, Invalid, NotFound } from "../../domain/errors.js";
import { ServerService } from "../servers.js";
import { BackupLookups, OPEN, isOpen } from "./common.js";
import { mayAddBindMounts } from "./configuration.js";
import { ResourceSources, runLock, sourceOf } from "./resource-sources.js";

// ---- resource restores (issue 19, w7/restore) ----

/**
 * POST /resource-backups/{id}/executions/{execution_id}/restore: a successful volume backup
 * restored into its own resource (an application, a service or a database), or with target_uuid
 * into another of the same kind (w8/rbsources), by a resource.restore job (the agent checks the
 * archive in staging before it stops anything; docs/resource-backups.md). The restore slot on the
 * execution and the job are written in one transaction under the target's run lock, as database
 * restores do (restore.ts); the clashes are resource-sources.ts's.
 */
export class ResourceRestores {
  constructor(
    private readonly lookups: BackupLookups,
    private readonly sources: ResourceSources,
  ) {}

  private get db() {
    return this.lookups.db;
  }

  async restore(scope: TeamScope, backupId: number, executionId: number, body: RestoreResourceBackupBody): Promise<{ executionId: number; restoreStatus: "queued" }> {
    // w8/rbsources: the backup's resource (an application, a service or a database) needs manage, as the target does.
    const schedule = await this.db.backupSchedule.findFirst({ where: { id: backupId, teamId: scope.teamId, backupType: { not: null } } });
    const source = schedule ? sourceOf(schedule) : null;
    const resource = source ? await this.sources.load(source.kind, source.id, scope.teamId) : null;
    if (!schedule || !resource) throw new NotFound("Resource backup");
    try {
      await this.sources.check(scope, resource, "manage");
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound("Resource backup");
      throw err;
    }
    const execution = await this.db.backupExecution.findFirst({ where: { id: executionId, scheduleId: schedule.id } });
    if (!execution) throw new NotFound("Backup execution");
    // (w8/rbconfig) configuration and full restores: the backup's type decides what the job brings back.
    const backupType = ResourceJobBackupType.parse(schedule.backupType);
    if (hasConfiguration(backupType) && body.target_uuid !== undefined && body.target_uuid !== resource.uuid) {
      throw new Invalid({ target_uuid: [`A ${backupType} backup is restored into its own ${resource.kind} in this version: omit target_uuid (volume backups can be restored into another resource).`] });
    }
    // The target (target_uuid: a clone into another resource of the same kind), else the backup's own resource.
    const target = body.target_uuid !== undefined && body.target_uuid !== resource.uuid ? await this.sources.target(scope, resource.kind, body.target_uuid) : resource;
    if (execution.status !== "success") throw new Conflict(`Only a successful backup can be restored; this execution is ${execution.status}.`);
    if (isOpen(execution.restoreStatus)) throw new Conflict("This backup is already being restored.");
    const location = await this.lookups.location(execution);
    if (location.local_path === null && location.s3 === null) {
      throw new Conflict("The backup's file is gone: it is neither on the server nor in the S3 storage (retention removed it).");
    }
    // The file on the backup's server is read only there: a target on another server reads the S3 copy.
    const from = target.serverId === resource.serverId ? location : { local_path: null, s3: location.s3 };
    if (from.s3 === null && from.local_path === null) {
      throw new Conflict(`The backup is only on the server ${resource.server.name}; a restore into a ${target.kind} on another server needs its copy in S3.`);
    }
    const volumes = await this.sources.volumes(target);
    if (hasVolumes(backupType) && !volumes.length) throw new Conflict(`Cannot restore now: the ${target.kind} ${target.name} has no persistent storages (volumes).`);
    if (target !== resource) {
      // Volumes go by storage name (each into the target's storage of that name, at its own mount path).
      const names = new Set(volumes.map((v) => v.name));
      const missing = (await this.sources.volumes(resource)).map((v) => v.name).filter((n) => !names.has(n));
      if (missing.length) {
        throw new Invalid({ target_uuid: [`The ${target.kind} ${target.name} has no storage named ${missing.join(", ")}: a restore into another resource puts each volume into the target's storage of the same name.`] });
      }
    }
    const clash = await this.sources.clash(this.db, target, "restore");
    if (clash) throw new Conflict(`Cannot restore now: ${clash}.`);
    if (!ServerService.agentConnected(target.server)) throw new Conflict(`Cannot restore now: the server ${target.server.name} is not reachable (its agent is not connected).`);

    let passphrase: string | null = null;
    if (execution.isEncrypted) {
      passphrase = body.passphrase ?? null;
      if (passphrase === null && execution.s3StorageId !== null) passphrase = (await this.lookups.deps.storages.destinationById(execution.s3StorageId))?.passphrase ?? null;
      if (passphrase === null) throw new Invalid({ passphrase: ["This backup is encrypted and its storage has no passphrase now: give the passphrase it was encrypted with."] });
    }
    const payload: ResourceRestorePayload = {
      resource: { kind: target.kind, uuid: target.uuid, name: target.name },
      volumes,
      execution_uuid: execution.uuid,
      from,
      passphrase,
      backup_type: backupType,
      apply: hasConfiguration(backupType) ? { may_add_bind_mounts: await mayAddBindMounts(this.db, scope) } : null,
    };
    const lock = runLock(target);
    const claimed = await this.db.$transaction(async (tx) => {
      await lockInTransaction(tx, this.lookups.deps.dialect, lock.kind, lock.id);
      const clashNow = await this.sources.clash(tx, target, "restore");
      if (clashNow) return clashNow;
      const r = await tx.backupExecution.updateMany({
        where: { id: execution.id, status: "success", OR: [{ restoreStatus: null }, { restoreStatus: { notIn: OPEN } }] },
        data: { restoreStatus: "queued", restoreReason: null, restoredAt: null },
      });
      if (r.count === 0) return false;
      const jobId = await this.lookups.deps.jobs.enqueue(tx, target.serverId, "resource.restore", payload);
      await tx.backupExecution.update({ where: { id: execution.id }, data: { restoreJobId: jobId } });
      return true;
    });
    if (claimed === false) throw new Conflict("This backup is already being restored.");
    if (typeof claimed === "string") throw new Conflict(`Cannot restore now: ${claimed}.`);
    this.lookups.deps.jobs.nudge(target.serverId);
    return { executionId: execution.id, restoreStatus: "queued" };
  }
}
