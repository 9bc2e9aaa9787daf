import type { Logger } from "pino";
import type { Db } from "../../db/client.js";
import { keepAlive, RowJobRunner, type RowJobOptions } from "../../jobs/row-jobs.js";

/** Concurrency, heartbeat and recovery of the reconciles (jobs/row-jobs.ts). */
export type DnsReconcilerOptions = RowJobOptions;

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
 * always reconciled. The queue and the recovery sweep are jobs/row-jobs.ts, shared with template
 * source syncs: the work runs in the control plane, which holds the provider credentials; no
 * agent is involved.
 */
export class DnsReconciler {
  private readonly runner: RowJobRunner;

  constructor(
    private readonly db: Db,
    private readonly work: ReconcileWork,
    private readonly opts: DnsReconcilerOptions = DNS_RECONCILER_DEFAULTS,
  ) {
    this.runner = new RowJobRunner(
      { name: "DNS reconcile", idKey: "dnsDomainId" },
      {
        recoverStale: (staleBefore, live) =>
          db.dnsDomain.updateMany({
            where: { reconcileState: "running", OR: [{ reconcileHeartbeatAt: null }, { reconcileHeartbeatAt: { lt: staleBefore } }], id: { notIn: live } },
            data: { reconcileState: "pending", reconcileHeartbeatAt: null },
          }),
        due: async () => (await db.dnsDomain.findMany({ where: { reconcileState: "pending" }, select: { id: true }, orderBy: { id: "asc" } })).map((d) => d.id),
      },
      (id) => this.run(id),
      opts,
    );
  }

  /** Asks for a reconcile of the domain: "already" when one is due, or running (which then runs once more). */
  async request(domainId: number): Promise<ReconcileDispatch> {
    const now = new Date();
    const idle = await this.db.dnsDomain.updateMany({
      where: { id: domainId, reconcileState: "idle" },
      data: { reconcileState: "pending", reconcileSeq: { increment: 1 }, reconcileRequestedAt: now },
    });
    if (idle.count > 0) {
      this.runner.enqueue(domainId);
      return "dispatched";
    }
    // Due or running: the bump makes a running one go again when it ends (its result may predate this request).
    await this.db.dnsDomain.updateMany({ where: { id: domainId, reconcileState: { in: ["pending", "running"] } }, data: { reconcileSeq: { increment: 1 }, reconcileRequestedAt: now } });
    this.runner.enqueue(domainId);
    return "already";
  }

  /** Starts the recovery sweep (instance start). */
  start(log: Pick<Logger, "warn" | "error">): void {
    this.runner.start(log);
  }

  /** Stops taking work; running reconciles finish (each provider call has its own timeout). */
  stop(): Promise<void> {
    return this.runner.stop();
  }

  /** Resolves when no reconcile is waiting or running here (tests read settled states). */
  idle(): Promise<void> {
    return this.runner.idle();
  }

  /** Stale `running` rows back to pending, then every pending row run. */
  sweep(): Promise<void> {
    return this.runner.sweep();
  }

  /** One run; true when it was asked for again meanwhile (and is pending again). */
  private async run(id: number): Promise<boolean> {
    const row = await this.db.dnsDomain.findUnique({ where: { id }, select: { reconcileSeq: true, reconcileState: true } });
    if (!row || row.reconcileState !== "pending") return false;
    // The claim: only one process turns this pending row into running.
    const claimed = await this.db.dnsDomain.updateMany({ where: { id, reconcileState: "pending", reconcileSeq: row.reconcileSeq }, data: { reconcileState: "running", reconcileHeartbeatAt: new Date() } });
    if (claimed.count === 0) return (await this.db.dnsDomain.count({ where: { id, reconcileState: "pending" } })) > 0;
    const stopBeating = keepAlive(() => this.db.dnsDomain.updateMany({ where: { id, reconcileState: "running" }, data: { reconcileHeartbeatAt: new Date() } }), this.opts.heartbeatMs);
    let outcome: Record<string, unknown> = {};
    try {
      outcome = await this.work(id);
    } finally {
      stopBeating();
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
