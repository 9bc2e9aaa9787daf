/**
 * Follow-up work of many events done in one pass, at most one pass per `everyMs`: the first
 * item after a quiet spell is handled on the next turn of the event loop (a lone reconnecting
 * agent waits for nothing), and items arriving while a pass runs, or within `everyMs` of the
 * last one, wait for the next pass together. A fleet reconnecting after a restart says hello
 * 10,000 times within seconds, in groups of a few per event-loop turn; the reads that follow
 * its hellos (open jobs to redeliver, failed preparations) then cost a statement per
 * `everyMs` instead of one per group.
 *
 * A pass that throws is reported to `onError`; its items are not retried (their callers'
 * periodic work covers them: the queue's pump redelivers).
 */
export class ThrottledBatch<T> {
  private items: T[] = [];
  private timer: NodeJS.Timeout | NodeJS.Immediate | null = null;
  private running: Promise<void> | null = null;
  private lastPass = -Infinity;
  private closed = false;

  constructor(
    private readonly everyMs: number,
    private readonly pass: (items: T[]) => Promise<void>,
    private readonly onError: (err: unknown) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  add(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.schedule();
  }

  /** Runs what is pending now and stops taking items. */
  async close(): Promise<void> {
    this.closed = true;
    this.clearTimer();
    await this.running;
    if (this.items.length) await this.run();
  }

  private schedule(): void {
    if (this.timer || this.running || !this.items.length) return;
    const wait = this.lastPass + this.everyMs - this.now();
    if (wait <= 0) this.timer = setImmediate(() => void this.run());
    else this.timer = setTimeout(() => void this.run(), wait);
  }

  private clearTimer(): void {
    if (!this.timer) return;
    if ("hasRef" in this.timer && "refresh" in this.timer) clearTimeout(this.timer);
    else clearImmediate(this.timer as NodeJS.Immediate);
    this.timer = null;
  }

  private run(): Promise<void> {
    this.timer = null;
    const items = this.items.splice(0);
    this.lastPass = this.now();
    this.running = this.pass(items)
      .catch((err) => this.onError(err))
      .finally(() => {
        this.running = null;
        if (!this.closed) this.schedule();
      });
    return this.running;
  }
}
