import { createWriteStream } from "node:fs";
import { rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { Readable, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import type { CreateResourceBackupBody } from "@capstan/shared";
import { encryptStream } from "@capstan/shared/openpgp";
import { Forbidden } from "../../../domain/errors.js";
import type { TeamScope } from "../../../domain/scope.js";
import { newUuid } from "../../../lib/ids.js";
import { ensurePrivateDir } from "../../../lib/private-files.js";
import { OPEN, backupKeyPrefix, type BackupLookups, type PlatformBackupDeps, type ScheduleRow } from "../common.js";
import { claimFields, claimRun } from "../executions.js";
import { platformBackupFilename } from "./archive.js";
import { platformArchive } from "./export.js";

/** What platform backups need of the instance (services/index.ts). */

export const PLATFORM_BACKUP = "platform_instance";
/** A run refreshes its heartbeat this often; one silent for HEARTBEAT_STALE_MS died with its control plane. */
const HEARTBEAT_MS = 15_000;
const HEARTBEAT_STALE_MS = 2 * 60_000;
const heartbeatKey = (executionId: number) => `platform_backup_heartbeat:${executionId}`;

type StartResult = { kind: "started" | "failed"; uuid: string; id: number } | { kind: "refused"; reason: string } | { kind: "lost" };

/**
 * platform_instance backups (issue 19): schedules of the one BackupSchedule table without a
 * resource, run by the CONTROL PLANE itself (no agent job): one archive of the whole database,
 * the instance key and a manifest (archive.ts, export.ts), streamed through gzip and OpenPGP
 * AEAD (when the storage has a passphrase) to the schedule's S3 storage and/or a private file
 * under `<data dir>/backups/platform/<schedule uuid>/`. Owners and admins of the root team only:
 * the archive holds every team's data and the key to their secrets.
 */
export class PlatformBackups {
  constructor(
    private readonly lookups: BackupLookups,
    private readonly deps: PlatformBackupDeps | null,
  ) {}

  private get db() {
    return this.lookups.db;
  }

  static is(row: Pick<ScheduleRow, "backupType">): boolean {
    return row.backupType === PLATFORM_BACKUP;
  }

  /** Owners and admins of the root team (the instance's first team) only: 403 for anyone else. */
  async requireInstanceAdmin(scope: TeamScope): Promise<void> {
    scope.requireTeamAdmin("manage platform backups");
    const root = await this.db.team.findFirst({ orderBy: { id: "asc" }, select: { id: true } });
    if (root?.id !== scope.teamId) throw new Forbidden("Only owners and admins of the root team can manage platform backups (they hold every team's data).");
  }

  /** The schedule row of a new platform backup (the caller checked the fields). */
  async create(scope: TeamScope, input: CreateResourceBackupBody, s3StorageId: number | null): Promise<ScheduleRow> {
    await this.requireInstanceAdmin(scope);
    if (!this.deps) throw new Error("platform backups are not wired in this control plane");
    return this.db.backupSchedule.create({
      data: {
        uuid: newUuid(),
        teamId: scope.teamId,
        backupType: PLATFORM_BACKUP,
        frequency: input.frequency,
        enabled: input.enabled,
        s3StorageId,
        keepLocally: input.keep_locally,
        numberOfBackupsLocally: input.number_of_backups_locally,
        numberOfBackupsRemote: input.number_of_backups_remote ?? null,
        stopDuringBackup: false,
      },
    });
  }

  /**
   * One run (manual or a cron tick): the execution row is the claim (a tick's through the unique
   * (schedule, scheduledFor) index, so one replica writes it), then the archive is written in the
   * background. A run that cannot start is refused (manual) or recorded as failed (scheduled).
   */
  async start(schedule: ScheduleRow, run: { trigger: "schedule" | "manual"; scheduledFor: Date | null }): Promise<StartResult> {
    const uuid = newUuid();
    const now = new Date();
    let problem: string | null = this.deps ? null : "this control plane cannot run platform backups";
    let destination: Awaited<ReturnType<BackupLookups["deps"]["storages"]["destinationById"]>> = null;
    if (!problem && schedule.s3StorageId !== null) {
      destination = await this.lookups.deps.storages.destinationById(schedule.s3StorageId);
      if (!destination) problem = "the schedule's S3 storage was deleted";
    }
    const encrypted = destination?.passphrase != null;
    const filename = platformBackupFilename(now, uuid, encrypted);
    let id = 0;
    const claim: "claimed" | "lost" | { refused: string } = await claimRun(this.lookups, { kind: "platformRuns", id: schedule.id }, schedule.id, run.scheduledFor, async (tx) => {
      if (!problem && (await tx.backupExecution.count({ where: { scheduleId: schedule.id, status: { in: OPEN } } }))) problem = "the previous backup of this schedule is still running";
      if (problem && run.trigger === "manual") return { refused: `Cannot back up now: ${problem}.` };
      const row = await tx.backupExecution.create({
        data: {
          ...claimFields(uuid, schedule.id, run, now),
          ...(problem ? { status: "failed", reason: problem, finishedAt: now } : { status: "running", filename, isEncrypted: encrypted, s3StorageId: destination ? schedule.s3StorageId : null }),
        },
      });
      id = row.id;
      if (!problem) await tx.instanceSetting.create({ data: { key: heartbeatKey(row.id), value: now.toISOString() } });
      return "claimed" as const;
    });
    if (claim === "lost") return { kind: "lost" };
    if (typeof claim === "object") return { kind: "refused", reason: claim.refused };
    if (problem) return { kind: "failed", uuid, id };
    void this.run(schedule, { id, filename }, destination).catch((err) =>
      this.lookups.log.error({ err: { message: (err as Error).message }, schedule: schedule.uuid }, "recording a platform backup's end failed"),
    );
    return { kind: "started", uuid, id };
  }

  /** Writes the archive and records the run's end (success with the size, or failed with the reason), then retention. */
  private async run(schedule: ScheduleRow, execution: { id: number; filename: string }, destination: Awaited<ReturnType<BackupLookups["deps"]["storages"]["destinationById"]>>): Promise<void> {
    const deps = this.deps!;
    const beat = setInterval(() => {
      void this.db.instanceSetting.updateMany({ where: { key: heartbeatKey(execution.id) }, data: { value: new Date().toISOString() } }).catch(() => undefined);
    }, HEARTBEAT_MS);
    beat.unref();
    const dir = join(deps.dataDir, "backups", "platform", schedule.uuid);
    const localPath = schedule.keepLocally ? join(dir, execution.filename) : null;
    const s3Key = destination ? `${backupKeyPrefix(destination.prefix, "platform-instance")}${execution.filename}` : null;
    try {
      const archive = (sink: Writable, signal?: AbortSignal) => {
        const stages: ((s: AsyncIterable<Buffer>) => AsyncIterable<Uint8Array>)[] = destination?.passphrase ? [(s) => encryptStream(s, destination.passphrase!)] : [];
        return pipeline(Readable.from(platformArchive(this.db, deps.database, deps.instanceKey(), new Date())), createGzip(), ...stages, sink, signal ? { signal } : {});
      };
      // One pass over the database: with S3 the bytes go up while they are made, and with
      // keep_locally to the private file at the same time (a failure of either stops both).
      if (localPath) ensurePrivateDir(dir);
      // The S3 SDK loads at the first backup that uses it: a control plane starts without it.
      const beside = destination && s3Key ? new (await import("@capstan/shared/s3")).UploadBeside(destination.target, s3Key) : null;
      let size: number;
      if (localPath) {
        const tmp = `${localPath}.partial`;
        let sent: number | null = null;
        try {
          const file = createWriteStream(tmp, { mode: 0o600, flags: "wx" });
          if (beside) {
            await archive(beside.sink(file), beside.signal).catch(async (err: unknown) => {
              throw await beside.failed(err);
            });
            sent = (await beside.sent).size;
          } else await archive(file);
          await rename(tmp, localPath);
          size = (await stat(localPath)).size;
        } catch (err) {
          await unlink(tmp).catch(() => undefined);
          await beside?.discard(err);
          throw err;
        }
        if (sent !== null && sent !== size) {
          await beside!.discard(new Error("size mismatch"));
          await unlink(localPath).catch(() => undefined);
          throw new Error(`the upload of ${s3Key} sent ${sent} bytes, but the backup file has ${size}; the object and the file were removed`);
        }
      } else {
        // S3 only (keep_locally false): straight from the pipeline to the upload, nothing on disk.
        await archive(beside!.sink(), beside!.signal).catch(async (err: unknown) => {
          throw await beside!.failed(err);
        });
        size = (await beside!.sent).size;
      }
      // The success and the local retention it causes are one change: nobody reads a success
      // while an older file beyond number_of_backups_locally is still listed as kept.
      const expired = await this.db.$transaction(async (tx) => {
        const ended = await tx.backupExecution.updateMany({
          where: { id: execution.id, status: { in: OPEN } },
          data: { status: "success", size: BigInt(size), localPath, s3Key, finishedAt: new Date() },
        });
        if (ended.count === 0) return [];
        const current = await tx.backupSchedule.findUnique({ where: { id: schedule.id }, select: { numberOfBackupsLocally: true } });
        if (!current) return [];
        const beyond = await tx.backupExecution.findMany({
          where: { scheduleId: schedule.id, status: "success", localPath: { not: null } },
          orderBy: { id: "desc" },
          skip: current.numberOfBackupsLocally,
          select: { id: true, localPath: true },
        });
        if (beyond.length) await tx.backupExecution.updateMany({ where: { id: { in: beyond.map((e) => e.id) } }, data: { localPath: null } });
        return beyond.map((e) => e.localPath!);
      });
      for (const file of expired) await unlink(file).catch(() => undefined);
      await this.remoteRetention(schedule, destination).catch((err) => this.lookups.log.warn({ err: { message: (err as Error).message }, schedule: schedule.uuid }, "platform backup retention failed"));
    } catch (err) {
      await this.db.backupExecution.updateMany({ where: { id: execution.id, status: { in: OPEN } }, data: { status: "failed", reason: (err as Error).message.slice(0, 2000), finishedAt: new Date() } });
    } finally {
      clearInterval(beat);
      await this.db.instanceSetting.deleteMany({ where: { key: heartbeatKey(execution.id) } });
    }
  }

  /** Remote: the newest number_of_backups_remote objects (null: all); the local files are pruned with the success. */
  private async remoteRetention(schedule: ScheduleRow, destination: Awaited<ReturnType<BackupLookups["deps"]["storages"]["destinationById"]>>): Promise<void> {
    const current = await this.db.backupSchedule.findUnique({ where: { id: schedule.id } });
    if (!current) return;
    if (destination && current.numberOfBackupsRemote !== null) {
      const remote = await this.db.backupExecution.findMany({ where: { scheduleId: schedule.id, status: "success", s3Key: { not: null }, s3StorageId: destination.id }, orderBy: { id: "desc" }, skip: current.numberOfBackupsRemote, select: { id: true, s3Key: true } });
      if (remote.length) {
        const { deleteS3 } = await import("@capstan/shared/s3");
        await deleteS3(destination.target, remote.map((e) => e.s3Key!));
        await this.db.backupExecution.updateMany({ where: { id: { in: remote.map((e) => e.id) } }, data: { s3Key: null } });
      }
    }
  }

  /** The repair sweep: a running platform backup whose heartbeat stopped died with its control plane. */
  async repair(): Promise<void> {
    const open = await this.db.backupExecution.findMany({ where: { status: { in: OPEN }, schedule: { backupType: PLATFORM_BACKUP } }, select: { id: true, createdAt: true } });
    if (!open.length) return;
    const beats = new Map(
      (await this.db.instanceSetting.findMany({ where: { key: { in: open.map((e) => heartbeatKey(e.id)) } } })).map((s) => [s.key, new Date(s.value).getTime()]),
    );
    const now = Date.now();
    for (const e of open) {
      const last = beats.get(heartbeatKey(e.id)) ?? e.createdAt.getTime();
      if (now - last < HEARTBEAT_STALE_MS) continue;
      await this.db.backupExecution.updateMany({ where: { id: e.id, status: { in: OPEN } }, data: { status: "failed", reason: "the control plane running this backup stopped before it ended", finishedAt: new Date() } });
      await this.db.instanceSetting.deleteMany({ where: { key: heartbeatKey(e.id) } });
    }
  }
}
