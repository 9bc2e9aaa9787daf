import type { Logger } from "pino";
import type { Db } from "../../db/client.js";

export interface DnsReconcilerOptions {
  /** Reconciles running at once in this process; more wait in line. */
  concurrency: number;
  /** How often a running reconcile marks its row as alive. */
  heartbeatMs: number;
  /** A `running` row not marked alive for this long belongs to a process that is gone. */
  staleMs: number;
  /** How often stale and due reconciles are looked for. */
  sweepMs: number;
}

export const DNS_RECONCILER_DEFAULTS: DnsReconcilerOptions = { concurrency: 2, heartbeatMs: 5_000, staleMs: 30_000, sweepMs: 15_000 };

export type ReconcileDispatch = "dispatched" | "already";

/** What one reconcile of a domain produced: stored on the row in the same write that ends the run. */
export type ReconcileWork = (domainId: number) => Promise<Record<string, unknown>>;

/**
 * The durable reconcile job of managed domains (issue 21, w5). The DnsDomain row is the job:
 * `pending` is a reconcile that is due, `running` one a process claimed (compare-and-set, so one
 * reconcile per domain at a time across replicas) and keeps alive with a heartbeat. Every
 * request bumps `reconcileSeq`; a run that ends and finds the number changed was asked for again
 * meanwhile (an fqdn changed during the run) and goes back to `pending`, so the last change is
 * always reconciled. On start and every sweep, `running` rows whose heartbeat is old (their
 * process died) go back to `pending`, and every `pending` row is run: nothing stays stuck.
 * The same shape as template source syncs (services/template-sources/): the work runs in the
 * control plane, which holds the provider credentials; no agent is involved.
 */
export class DnsReconciler {
  private readonly queue: number[] = [];
  private readonly queued = new Set<number>();
  private readonly running = new Map<number, Promise<void>>();
  private sweepTimer: NodeJS.Timeout | null = null;
  private stopped = true;
  private log: Pick<Logger, "warn" | "error"> | undefined;

  constructor(
    private readonly db: Db,
    private readonly work: ReconcileWork,
    private readonly opts: DnsReconcilerOptions = DNS_RECONCILER_DEFAULTS,
  ) {}

  /** Asks for a reconcile of the domain: "already" when one is due, or running (which then runs once more). */
  async request(domainId: number): Promise<ReconcileDispatch> {
    const now = new Date();
    const idle = await this.db.dnsDomain.updateMany({
      where: { id: domainId, reconcileState: "idle" },
      data: { reconcileState: "pending", reconcileSeq: { increment: 1 }, reconcileRequestedAt: now },
    });
    if (idle.count > 0) {
      this.enqueue(domainId);
      return "dispatched";
    }
    // Due or running: the bump makes a running one go again when it ends (its result may predate this request).
    await this.db.dnsDomain.updateMany({ where: { id: domainId, reconcileState: { in: ["pending", "running"] } }, data: { reconcileSeq: { increment: 1 }, reconcileRequestedAt: now } });
    this.enqueue(domainId);
    return "already";
  }

  /** Starts the recovery sweep (instance start). */
  start(log: Pick<Logger, "warn" | "error">): void {
    this.log = log;
    this.stopped = false;
    void this.sweep();
    this.sweepTimer = setInterval(() => void this.sweep(), this.opts.sweepMs);
    this.sweepTimer.unref();
  }

  /** Stops taking work; running reconciles finish (each provider call has its own timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    this.queue.length = 0;
    this.queued.clear();
    await Promise.allSettled([...this.running.values()]);
  }

  /** Resolves when no reconcile is waiting or running here (tests read settled states). */
  async idle(): Promise<void> {
    while (this.running.size > 0 || this.queue.length > 0) await Promise.allSettled([...this.running.values()]);
  }

  /** Stale `running` rows back to pending, then every pending row run. */
  async sweep(): Promise<void> {
    if (this.stopped) return;
    try {
      const staleBefore = new Date(Date.now() - this.opts.staleMs);
      await this.db.dnsDomain.updateMany({
        where: { reconcileState: "running", OR: [{ reconcileHeartbeatAt: null }, { reconcileHeartbeatAt: { lt: staleBefore } }], id: { notIn: [...this.running.keys()] } },
        data: { reconcileState: "pending", reconcileHeartbeatAt: null },
      });
      const due = await this.db.dnsDomain.findMany({ where: { reconcileState: "pending" }, select: { id: true }, orderBy: { id: "asc" } });
      for (const d of due) this.enqueue(d.id);
    } catch (err) {
      if (!this.stopped) this.log?.warn({ err }, "DNS reconcile sweep failed");
    }
  }

  private enqueue(id: number): void {
    if (this.stopped || this.queued.has(id) || this.running.has(id)) return;
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
        .catch((err) => this.log?.error({ err, dnsDomainId: id }, "DNS reconcile crashed"))
        .finally(() => {
          this.running.delete(id);
          if (again) this.enqueue(id);
          this.pump();
        });
      this.running.set(id, run);
    }
  }

  /** One run; true when it was asked for again meanwhile (and is pending again). */
  private async run(id: number): Promise<boolean> {
    const row = await this.db.dnsDomain.findUnique({ where: { id }, select: { reconcileSeq: true, reconcileState: true } });
    if (!row || row.reconcileState !== "pending") return false;
    // The claim: only one process turns this pending row into running.
    const claimed = await this.db.dnsDomain.updateMany({ where: { id, reconcileState: "pending", reconcileSeq: row.reconcileSeq }, data: { reconcileState: "running", reconcileHeartbeatAt: new Date() } });
    if (claimed.count === 0) return (await this.db.dnsDomain.count({ where: { id, reconcileState: "pending" } })) > 0;
    const heartbeat = setInterval(() => {
      void this.db.dnsDomain.updateMany({ where: { id, reconcileState: "running" }, data: { reconcileHeartbeatAt: new Date() } }).catch(() => undefined);
    }, this.opts.heartbeatMs);
    heartbeat.unref();
    let outcome: Record<string, unknown> = {};
    try {
      outcome = await this.work(id);
    } finally {
      clearInterval(heartbeat);
      const done = await this.db.dnsDomain.updateMany({
        where: { id, reconcileState: "running", reconcileSeq: row.reconcileSeq },
        data: { ...outcome, reconcileState: "idle", reconcileHeartbeatAt: null },
      });
      if (done.count === 0) {
        // Asked for again during the run (or the row is gone): keep the outcome, run once more.
        const back = await this.db.dnsDomain.updateMany({ where: { id, reconcileState: "running" }, data: { ...outcome, reconcileState: "pending", reconcileHeartbeatAt: null } });
        return back.count > 0;
      }
    }
    return false;
  }
}
