import cron, { type ScheduledTask } from "node-cron";
import type { Db } from "../db/client.js";
import type { Logger } from "../lib/log.js";
import type { BackupService, ScheduleWatcher } from "../services/backups/index.js";

/** How often every replica re-reads the enabled schedules (changes made on other replicas). */
export const RECONCILE_INTERVAL_MS = 30_000;

export interface BackupSchedulerOptions {
  reconcileMs?: number;
  log: Pick<Logger, "error" | "warn" | "debug">;
}

/** A cron tick's run key: the tick's UTC minute. */
export function tickMinute(at: Date): Date {
  return new Date(Math.floor(at.getTime() / 60_000) * 60_000);
}

/**
 * Runs the enabled backup schedules with node-cron, in UTC. Every replica runs every schedule;
 * each tick is claimed through the database (BackupService.claimTick inserts the execution for
 * the tick's minute under a unique index), so exactly one replica starts the backup. Schedules
 * changed through this replica are picked up at once, those changed through another replica
 * on the next reconcile (every 30 s). What a replica that died left undone is repaired by the
 * one repair sweep (jobs/repair-sweep.ts).
 */
export class BackupScheduler implements ScheduleWatcher {
  private readonly tasks = new Map<number, { frequency: string; task: ScheduledTask }>();
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly reconcileMs: number;

  constructor(
    private readonly db: Db,
    private readonly backups: BackupService,
    private readonly opts: BackupSchedulerOptions,
  ) {
    this.reconcileMs = opts.reconcileMs ?? RECONCILE_INTERVAL_MS;
    backups.bindScheduler(this, opts.log);
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    await this.reconcile().catch((err) => this.opts.log.error({ err: { message: (err as Error).message } }, "backup scheduler: first reconcile failed"));
    const loop = () => {
      if (!this.running) return;
      this.track(
        this.reconcile()
          .catch((err) => this.opts.log.error({ err: { message: (err as Error).message } }, "backup scheduler: reconcile failed"))
          .finally(() => {
            if (!this.running) return;
            this.timer = setTimeout(loop, this.reconcileMs);
            this.timer.unref();
          }),
      );
    };
    this.timer = setTimeout(loop, this.reconcileMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const id of [...this.tasks.keys()]) this.drop(id);
    await Promise.allSettled([...this.inflight]);
  }

  /** Re-reads every enabled schedule, creates/replaces/drops tasks to match. */
  async reconcile(): Promise<void> {
    // Database dump schedules and resource backups (issue 19) alike.
    const rows = await this.db.backupSchedule.findMany({
      // w8/rbsources: services' volume backups too.
      where: { enabled: true, OR: [{ databaseId: { not: null } }, { applicationId: { not: null } }, { serviceId: { not: null } }] },
      select: { id: true, frequency: true },
    });
    if (!this.running) return;
    const seen = new Set<number>();
    for (const r of rows) {
      seen.add(r.id);
      this.watch(r.id, r.frequency);
    }
    for (const id of [...this.tasks.keys()]) if (!seen.has(id)) this.drop(id);
  }

  /** Called by BackupService after a create/update/delete in this replica. */
  changed(scheduleId: number): void {
    if (!this.running) return;
    this.track(
      this.db.backupSchedule
        .findUnique({ where: { id: scheduleId }, select: { id: true, frequency: true, enabled: true, databaseId: true, applicationId: true, serviceId: true } })
        .then((r) => {
          if (!this.running) return;
          if (r && r.enabled && (r.databaseId !== null || r.applicationId !== null || r.serviceId !== null)) this.watch(r.id, r.frequency);
          else this.drop(scheduleId);
        })
        .catch((err) => this.opts.log.error({ err: { message: (err as Error).message } }, "backup scheduler: refreshing a schedule failed")),
    );
  }

  /** The next tick of a schedule this replica runs (null when it does not run it, or it is not valid). */
  nextRun(scheduleId: number, frequency: string): Date | null {
    let t = this.tasks.get(scheduleId);
    if (!t || t.frequency !== frequency) {
      // Not loaded yet (just created, or changed elsewhere): compute from the expression itself.
      if (!this.running || !cron.validate(frequency)) return null;
      t = this.watch(scheduleId, frequency) ?? undefined;
    }
    return t?.task.getNextRun() ?? null;
  }

  /**
   * One tick of a schedule: claims the run of the tick's minute. Exposed for tests, which fire
   * ticks of two replicas at the same minute instead of waiting for the clock.
   */
  fire(scheduleId: number, at: Date): Promise<"started" | "failed" | "lost" | "skipped"> {
    const p = this.backups.claimTick(scheduleId, tickMinute(at));
    this.track(p.catch(() => {}));
    return p;
  }

  /** Schedule ids this replica has cron tasks for. */
  watched(): number[] {
    return [...this.tasks.keys()];
  }

  private watch(id: number, frequency: string): { frequency: string; task: ScheduledTask } | null {
    const current = this.tasks.get(id);
    if (current && current.frequency === frequency) return current;
    if (current) this.drop(id);
    let task: ScheduledTask;
    try {
      task = cron.createTask(
        frequency,
        (ctx) =>
          this.fire(id, ctx.date)
            .then((r) => this.opts.log.debug({ schedule: id, at: ctx.date.toISOString(), result: r }, "backup tick"))
            .catch((err) => this.opts.log.error({ err: { message: (err as Error).message }, schedule: id }, "backup tick failed")),
        { timezone: "UTC", name: `capstan-backup-${id}`, unref: true, logger: cronLogger(this.opts.log) },
      );
    } catch (err) {
      // Stored expressions were validated on write; one that is not valid any more is skipped, loudly.
      this.opts.log.error({ err: { message: (err as Error).message }, schedule: id }, "backup schedule has an invalid cron expression");
      return null;
    }
    void task.start();
    const entry = { frequency, task };
    this.tasks.set(id, entry);
    return entry;
  }

  private drop(id: number): void {
    const t = this.tasks.get(id);
    if (!t) return;
    this.tasks.delete(id);
    void t.task.destroy();
  }

  private track(p: Promise<unknown>): void {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }
}

/** node-cron's own messages (missed ticks on a busy event loop...) go to our log, quietly. */
function cronLogger(log: Pick<Logger, "error" | "warn" | "debug">) {
  return {
    info: (m: string) => log.debug({ source: "node-cron" }, m),
    warn: (m: string) => log.warn({ source: "node-cron" }, m),
    error: (m: string | Error, err?: Error) => log.error({ source: "node-cron", err: { message: (err ?? m) instanceof Error ? ((err ?? m) as Error).message : String(m) } }, "node-cron error"),
    debug: (m: string | Error) => log.debug({ source: "node-cron" }, String(m)),
  };
}
