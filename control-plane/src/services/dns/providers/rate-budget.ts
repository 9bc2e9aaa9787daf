import { createHash } from "node:crypto";
import { DnsProviderError } from "./types.js";

/**
 * A provider's documented request limit kept on our side (issue 21, "Safety"; w7), per
 * credential: at most `limit` calls in any `windowMs`, and none while the provider asked us to
 * wait (a 429's Retry-After). Cloudflare's limit is 1200 requests per five minutes per user,
 * counted with the dashboard's and other tools' calls, and going over blocks every call of the
 * user for five minutes: Capstan keeps under it with a margin rather than finding it by a 429.
 * A call that would have to wait longer than `maxWaitMs` is not made: the caller's reconcile
 * ends with the reason, and the next one continues. The count is per control-plane process.
 */
export class CallBudget {
  private readonly calls = new Map<string, number[]>();
  private readonly blocked = new Map<string, number>();

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly maxWaitMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The key a credential is counted under (never the secret itself). */
  static keyOf(secret: string): string {
    return createHash("sha256").update(secret).digest("hex");
  }

  /** Takes one call from the budget, waiting (at most maxWaitMs) for room; throws when the wait would be longer. */
  async take(key: string, sleep: (ms: number) => Promise<void>, what: string): Promise<void> {
    for (;;) {
      const now = this.now();
      const until = this.blocked.get(key) ?? 0;
      const recent = (this.calls.get(key) ?? []).filter((t) => t > now - this.windowMs);
      this.calls.set(key, recent);
      let waitMs = Math.max(0, until - now);
      if (recent.length >= this.limit) waitMs = Math.max(waitMs, recent[0]! + this.windowMs - now);
      if (waitMs === 0) {
        recent.push(now);
        return;
      }
      if (waitMs > this.maxWaitMs) {
        throw new DnsProviderError(
          until > now
            ? `${what} asked to wait ${Math.ceil(waitMs / 1000)} s more before the next request (rate limit); nothing more was sent. Sync again later.`
            : `Capstan's budget of ${this.limit} ${what} requests per ${Math.round(this.windowMs / 60_000)} minutes for this token is used up (the provider's own limit is higher, shared with other tools); the next request is possible in ${Math.ceil(waitMs / 1000)} s. Sync again later.`,
        );
      }
      await sleep(waitMs);
    }
  }

  /** The provider asked for a pause (429 Retry-After): no call with this key for `ms`. */
  pause(key: string, ms: number): void {
    this.blocked.set(key, Math.max(this.blocked.get(key) ?? 0, this.now() + ms));
  }
}
