import type { Logger } from "pino";

/**
 * Jobs that run in the control plane and whose durable record is a row of their own table (a
 * template source's sync, a managed domain's reconcile): `pending` is due, `running` is claimed
 * by a process that keeps it alive with a heartbeat. This runner is the in-process half they
 * share: a queue with a concurrency limit, at most one run per row here, and a recovery sweep
 * (on start and every `sweepMs`) that puts rows of dead processes back to pending and runs
 * every pending row, so nothing stays stuck. The claim, the work and the outcome are the
 * owner's (`run`), as they differ per table.
 */
export interface RowJobTable {
  /** Rows claimed but not kept alive since `staleBefore` (and not running here, `live`) back to pending. */
  recoverStale(staleBefore: Date, live: number[]): Promise<unknown>;
  /** The ids of the pending rows, oldest first. */
  due(): Promise<number[]>;
}

export interface RowJobOptions {
  /** Runs at once in this process; more wait in line. */
  concurrency: number;
  /** How often a running job marks its row alive (keepAlive). */
  heartbeatMs: number;
  /** A claimed row not kept alive for this long belongs to a process that is gone. */
  staleMs: number;
  /** How often stale and due rows are looked for. */
  sweepMs: number;
}

export class RowJobRunner {
  private readonly queue: number[] = [];
  private readonly queued = new Set<number>();
  private readonly running = new Map<number, Promise<void>>();
  /** Rows asked for while they ran here: run once more when that run ends. */
  private readonly rerun = new Set<number>();
  private sweepTimer: NodeJS.Timeout | null = null;
  private stopped = true;
  private log: Pick<Logger, "warn" | "error"> | undefined;

  /**
   * @param what names the job in log lines ("DNS reconcile"); `idKey` names the row's id there.
   * @param run one run of a row; true when it was asked for again meanwhile and must run once more.
   */
  constructor(
    private readonly what: { name: string; idKey: string },
    private readonly table: RowJobTable,
    private readonly run: (id: number) => Promise<boolean>,
    private readonly opts: RowJobOptions,
  ) {}

  /** Starts the recovery sweep (instance start). */
  start(log: Pick<Logger, "warn" | "error">): void {
    this.log = log;
    this.stopped = false;
    void this.sweep();
    this.sweepTimer = setInterval(() => void this.sweep(), this.opts.sweepMs);
    this.sweepTimer.unref();
  }

  /** Stops taking work; `interrupt` (e.g. aborting clones) runs before the running ones are awaited. */
  async stop(interrupt?: () => void): Promise<void> {
    this.stopped = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    this.queue.length = 0;
    this.queued.clear();
    this.rerun.clear();
    interrupt?.();
    await Promise.allSettled([...this.running.values()]);
  }

  /** Resolves when no run is waiting or running here (tests read settled states). */
  async idle(): Promise<void> {
    while (this.running.size > 0 || this.queue.length > 0) await Promise.allSettled([...this.running.values()]);
  }

  /** Whether the row waits or runs in this process. */
  has(id: number): boolean {
    return this.queued.has(id) || this.running.has(id);
  }

  /** Stale rows back to pending, then every pending row run. */
  async sweep(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.table.recoverStale(new Date(Date.now() - this.opts.staleMs), [...this.running.keys()]);
      for (const id of await this.table.due()) this.enqueue(id);
    } catch (err) {
      if (!this.stopped) this.log?.warn({ err }, `${this.what.name} sweep failed`);
    }
  }

  /**
   * Runs the row here soon. A row running here now runs once more after: what asked for it may
   * have set it due after the run read it, or after the run finished with it but before the run
   * ended (a wakeup lost otherwise, until the next sweep).
   */
  enqueue(id: number): void {
    if (this.stopped || this.queued.has(id)) return;
    if (this.running.has(id)) {
      this.rerun.add(id);
      return;
    }
    this.queue.push(id);
    this.queued.add(id);
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.running.size < this.opts.concurrency && this.queue.length > 0) {
      const id = this.queue.shift()!;
      this.queued.delete(id);
      let again = false;
      const run = this.run(id)
        .then((a) => {
          again = a;
        })
        .catch((err) => this.log?.error({ err, [this.what.idKey]: id }, `${this.what.name} crashed`))
        .finally(() => {
          this.running.delete(id);
          if (this.rerun.delete(id) || again) this.enqueue(id);
          this.pump();
        });
      this.running.set(id, run);
    }
  }
}

/** Marks a claimed row alive every `ms` until the returned function is called (failures are left to the stale check). */
export function keepAlive(beat: () => Promise<unknown>, ms: number): () => void {
  const timer = setInterval(() => void beat().catch(() => undefined), ms);
  timer.unref();
  return () => clearInterval(timer);
}
