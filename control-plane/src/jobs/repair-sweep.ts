import type { Logger } from "../lib/log.js";
import type { JobQueue } from "./queue.js";

/** A resource's own repair, for what no job's end says (a job removed with its server, a claim whose replica died). */
export interface RepairStep {
  name: string;
  run(): Promise<void>;
}

/** How often every replica sweeps. */
export const REPAIR_INTERVAL_MS = 2000;

/**
 * The one repair sweep, on every replica: first, for every job type, the outcomes of ended
 * jobs that no replica applied (the one that ended them died first, or the handler failed:
 * JobQueue.applyMissedOutcomes, through the outcome map); then each resource's own step, in
 * order (the deployment scheduler's: stale claims, stranded queues, a pass that starts queued
 * deployments; the backups': runs whose job vanished). One failing step does not stop the others.
 */
export class RepairSweep {
  private timer: NodeJS.Timeout | null = null;
  private sweeping: Promise<void> = Promise.resolve();

  constructor(
    private readonly jobs: JobQueue,
    private readonly steps: readonly RepairStep[],
    private readonly log: Pick<Logger, "error">,
  ) {}

  /** One pass (the periodic loop runs this; tests call it directly). */
  async run(): Promise<void> {
    await this.jobs.applyMissedOutcomes().catch((err) => this.log.error({ err: { message: (err as Error).message } }, "repair sweep: applying missed job outcomes failed"));
    for (const step of this.steps) {
      await step.run().catch((err) => this.log.error({ err: { message: (err as Error).message }, step: step.name }, "repair sweep: a step failed"));
    }
  }

  start(intervalMs = REPAIR_INTERVAL_MS): void {
    const loop = () => {
      this.sweeping = this.run().finally(() => {
        if (!this.timer) return;
        this.timer = setTimeout(loop, intervalMs);
        this.timer.unref();
      });
    };
    this.timer = setTimeout(loop, 0);
    this.timer.unref();
  }

  /** Ends the loop and waits for a pass in progress. */
  async stop(): Promise<void> {
    const t = this.timer;
    this.timer = null;
    if (t) clearTimeout(t);
    await this.sweeping;
  }
}
