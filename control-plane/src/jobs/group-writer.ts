export interface GroupWriterOptions {
  /** Items per write (default 200). */
  maxItems?: number;
  /** Start on the next turn of the event loop and yield between writes (see GroupWriter). */
  startOnNextTurn?: boolean;
  /**
   * Groups written at once (default 1). More only for writes that may overlap in time: with
   * PostgreSQL each statement waits a round trip, and one at a time caps the rate at one group
   * per round trip.
   */
  concurrency?: number;
}

/**
 * Group commit for the queue's hot writes. Items asked for while a write is in flight go
 * together in the next one: an idle writer starts at once (in a microtask, so calls of the
 * same event-loop turn share it), so a lone item waits for nothing, and under load one
 * statement carries many items instead of one statement (and one commit) each.
 *
 * A batch that fails is retried item by item, so one bad item (a row whose server was just
 * deleted) fails alone and not its whole batch.
 *
 * `startOnNextTurn` waits for the next turn of the event loop before the first write, and
 * yields to it between batches: for bursts of socket events (a fleet reconnecting), which
 * then share a write, while pings and other sockets keep being served in between.
 */
export class GroupWriter<T, R> {
  private queued: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
  private running = 0;
  private idle: Promise<void> = Promise.resolve();
  private settle: () => void = () => {};
  private readonly maxItems: number;
  private readonly nextTurn: boolean;
  private readonly concurrency: number;

  constructor(
    /** Writes the items; answers one result per item, in order. */
    private readonly write: (items: T[]) => Promise<R[]>,
    opts: GroupWriterOptions = {},
  ) {
    this.maxItems = opts.maxItems ?? 200;
    this.nextTurn = opts.startOnNextTurn ?? false;
    this.concurrency = Math.max(1, opts.concurrency ?? 1);
  }

  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queued.push({ item, resolve, reject });
      if (this.running >= this.concurrency) return;
      if (this.running === 0) this.idle = new Promise((r) => (this.settle = r));
      this.running++;
      if (this.nextTurn) setImmediate(() => void this.drain());
      else queueMicrotask(() => void this.drain());
    });
  }

  /** Resolves once everything added so far is written (or failed). */
  flushed(): Promise<void> {
    return this.idle;
  }

  private async drain(): Promise<void> {
    for (let first = true; this.queued.length; first = false) {
      if (!first && this.nextTurn) await new Promise((r) => setImmediate(r));
      const batch = this.queued.splice(0, this.maxItems);
      if (!batch.length) break;
      try {
        const results = await this.write(batch.map((b) => b.item));
        batch.forEach((b, i) => b.resolve(results[i]!));
      } catch (err) {
        if (batch.length === 1) {
          batch[0]!.reject(err);
          continue;
        }
        for (const b of batch) {
          try {
            b.resolve((await this.write([b.item]))[0]!);
          } catch (one) {
            b.reject(one);
          }
        }
      }
    }
    this.running--;
    if (this.running === 0) this.settle();
  }
}

/**
 * Runs writes one after another. Two grouped UPDATEs of the same table running at once on
 * PostgreSQL can lock their rows in opposite orders and deadlock (PostgreSQL notices after
 * its deadlock_timeout, 1 s by default, and aborts one); writes of one process that may touch
 * the same rows go through one of these instead.
 */
export class Serial {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(write: () => Promise<T>): Promise<T> {
    const next = this.tail.then(write, write);
    this.tail = next.catch(() => {});
    return next;
  }
}
