import { basename } from "node:path";
import { DbBackupResult, DbRestoreResult, ResourceRestoreResult } from "@capstan/shared";
import { chunks } from "../../db/chunks.js";
import type { JobRow } from "../../jobs/queue.js";
import { BackupLookups, OPEN, isOpen, CLAIM_STALE_MS, safeJson } from "./common.js";

/**
 * What the end of a db.backup or db.restore job means for its execution (outcome handlers,
 * jobs/outcome-map.ts), and repair(): what no job's end says, repaired by the repair sweep.
 */
export class BackupOutcomes {
  constructor(private readonly lookups: BackupLookups) {}

  /** db.backup ended: the execution records the file, retention results clear older rows' places. */
  async applyBackupEnd(job: Pick<JobRow, "id" | "status" | "result" | "error"> & { finishedAt?: Date | null }): Promise<void> {
    if (job.status !== "succeeded" && job.status !== "failed" && job.status !== "cancelled") return;
    const execution = await this.lookups.db.backupExecution.findUnique({ where: { jobId: job.id }, include: { schedule: { select: { id: true, databaseId: true, backupType: true } } } });
    if (!execution || !isOpen(execution.status)) return;
    const finishedAt = job.finishedAt ?? new Date();
    const open = { id: execution.id, status: { in: OPEN } };
    if (job.status !== "succeeded") {
      await this.lookups.db.backupExecution.updateMany({ where: open, data: { status: "failed", reason: job.error ?? job.status, finishedAt } });
      return;
    }
    const parsed = DbBackupResult.safeParse(safeJson(job.result));
    if (!parsed.success) {
      await this.lookups.db.backupExecution.updateMany({ where: open, data: { status: "failed", reason: "the agent sent an invalid backup result", finishedAt } });
      return;
    }
    const r = parsed.data;
    const updated = await this.lookups.db.backupExecution.updateMany({
      where: open,
      data: {
        status: "success",
        filename: r.filename,
        size: BigInt(r.size),
        isEncrypted: r.is_encrypted,
        localPath: r.local_path,
        s3Key: r.s3_key,
        reason: null,
        finishedAt,
      },
    });
    if (updated.count === 0) return;
    await this.applyRetention(execution.schedule, execution, r.removed_local, r.removed_remote);
  }

  /**
   * Files the agent removed by retention. Local ones are the schedule's own (its directory);
   * names or paths are accepted. Remote ones are keys the agent listed under the database's
   * prefix in the storage this run went to, so they may be any schedule's of the database; an
   * object is its key in that endpoint's bucket, which other storage records of the team may
   * name too (one re-created with new keys), so executions recorded in any of them lose it.
   * Their s3StorageId stays: it is still where the backup went, and whose passphrase it has.
   */
  private async applyRetention(
    schedule: { id: number; databaseId: number | null; backupType: string | null },
    current: { id: number; s3StorageId: number | null },
    removedLocal: string[],
    removedRemote: string[],
  ): Promise<void> {
    const currentId = current.id;
    for (const part of chunks(removedLocal)) {
      const names = part.map((p) => basename(p));
      await this.lookups.db.backupExecution.updateMany({
        where: { scheduleId: schedule.id, id: { not: currentId }, OR: [{ localPath: { in: part } }, { filename: { in: names } }] },
        data: { localPath: null },
      });
    }
    if (current.s3StorageId === null || removedRemote.length === 0) return;
    // A dump schedule's objects are under its database's prefix (any dump schedule of it); a
    // resource backup's under its own schedule's prefix (w8/rbsources: resourceKeyPrefix).
    const owners = schedule.backupType === null && schedule.databaseId !== null ? { schedule: { databaseId: schedule.databaseId, backupType: null } } : { scheduleId: schedule.id };
    const listed = await this.lookups.db.s3Storage.findUnique({ where: { id: current.s3StorageId }, select: { teamId: true, endpoint: true, bucket: true } });
    if (!listed) return;
    const sameBucket = await this.lookups.db.s3Storage.findMany({ where: { teamId: listed.teamId, endpoint: listed.endpoint, bucket: listed.bucket }, select: { id: true } });
    for (const part of chunks(removedRemote)) {
      await this.lookups.db.backupExecution.updateMany({
        where: { ...owners, id: { not: currentId }, s3StorageId: { in: sameBucket.map((s) => s.id) }, s3Key: { in: part } },
        data: { s3Key: null },
      });
    }
  }

  /** db.restore or (resource restores, w7/restore) resource.restore ended: the execution's restore fields. */
  async applyRestoreEnd(job: Pick<JobRow, "id" | "status" | "result" | "error"> & { finishedAt?: Date | null }, result: typeof DbRestoreResult | typeof ResourceRestoreResult = DbRestoreResult): Promise<void> {
    if (job.status !== "succeeded" && job.status !== "failed" && job.status !== "cancelled") return;
    const finishedAt = job.finishedAt ?? new Date();
    const where = { restoreJobId: job.id, restoreStatus: { in: OPEN } };
    if (job.status === "succeeded" && result.safeParse(safeJson(job.result)).success) {
      await this.lookups.db.backupExecution.updateMany({ where, data: { restoreStatus: "success", restoreReason: null, restoredAt: finishedAt } });
    } else {
      const reason = job.status === "succeeded" ? "the agent sent an invalid restore result" : (job.error ?? job.status);
      await this.lookups.db.backupExecution.updateMany({ where, data: { restoreStatus: "failed", restoreReason: reason, restoredAt: null } });
    }
  }

  /**
   * What no job's end says, repaired on every replica by the repair sweep (jobs/repair-sweep.ts;
   * outcomes a replica that died left unapplied are applied by its first step): jobs that
   * vanished (their server was removed), running jobs shown as running, claims that never got
   * their job.
   */
  async repair(): Promise<void> {
    const open = await this.lookups.db.backupExecution.findMany({
      // platform_instance runs have no job: platform/index.ts repairs them by their heartbeat.
      where: { OR: [{ status: { in: OPEN } }, { restoreStatus: { in: OPEN } }], schedule: { OR: [{ backupType: null }, { backupType: { not: "platform_instance" } }] } },
      select: { id: true, status: true, jobId: true, restoreStatus: true, restoreJobId: true, createdAt: true },
    });
    for (const part of chunks(open)) {
      const ids = part.flatMap((e) => [e.jobId, e.restoreJobId]).filter((v): v is string => !!v);
      const jobs = ids.length
        ? await this.lookups.db.job.findMany({ where: { id: { in: ids } }, select: { id: true, status: true } })
        : [];
      const byId = new Map(jobs.map((j) => [j.id, j]));
      for (const e of part) {
        if (isOpen(e.status)) {
          const job = e.jobId ? byId.get(e.jobId) : undefined;
          if (!e.jobId) {
            if (Date.now() - e.createdAt.getTime() > CLAIM_STALE_MS) {
              await this.lookups.db.backupExecution.updateMany({ where: { id: e.id, status: { in: OPEN }, jobId: null }, data: { status: "failed", reason: "the run was never handed to an agent", finishedAt: new Date() } });
            }
          } else if (!job) {
            await this.lookups.db.backupExecution.updateMany({ where: { id: e.id, status: { in: OPEN } }, data: { status: "failed", reason: "the backup's job was removed with its server", finishedAt: new Date() } });
          } else if (job.status === "running" && e.status === "queued") {
            await this.lookups.db.backupExecution.updateMany({ where: { id: e.id, status: "queued" }, data: { status: "running" } });
          }
        }
        if (isOpen(e.restoreStatus) && e.restoreJobId) {
          const job = byId.get(e.restoreJobId);
          if (!job) {
            await this.lookups.db.backupExecution.updateMany({ where: { id: e.id, restoreJobId: e.restoreJobId, restoreStatus: { in: OPEN } }, data: { restoreStatus: "failed", restoreReason: "the restore's job was removed with its server" } });
          } else if (job.status === "running" && e.restoreStatus === "queued") {
            await this.lookups.db.backupExecution.updateMany({ where: { id: e.id, restoreJobId: job.id, restoreStatus: "queued" }, data: { restoreStatus: "running" } });
          }
        }
      }
    }
  }
}
