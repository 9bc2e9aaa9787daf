import { isIP } from "node:net";

/**
 * Who may start a socket.io handshake now (docs/agents.md, docs/limits.md).
 *
 * Handshakes fall in two lanes. A handshake whose agent token is known to this replica (its
 * hash is in KnownAgentTokens) is in the `known` lane: a whole fleet reconnecting after a
 * restart shares a large allowance, without a per-address cap (many servers behind one NAT
 * address reconnect at once). Every other handshake (unknown agent tokens, dashboards on
 * /fleet) is in the `other` lane: few in flight per source address and few in total, so
 * bogus handshakes can never take the known agents' room.
 *
 * Failed attempts (a token that matches nothing) drain a bucket per source address; an
 * address whose bucket is empty is refused in the `other` lane before any database work,
 * until the bucket refills. Known agents are not held back by it: a real agent behind the
 * same address as a guesser keeps connecting. The buckets are bounded in number: the least
 * recently touched is dropped first.
 */
export interface AdmissionLimits {
  /** Known-agent handshakes in flight on this replica, from all addresses together. */
  knownInFlight: number;
  /** Other handshakes in flight on this replica, from all addresses together. */
  otherInFlight: number;
  /** Other handshakes in flight from one source address. */
  otherInFlightPerAddress: number;
  /** Failed attempts one source address may make at once... */
  failureBurst: number;
  /** ...and then one every this many ms. */
  failureRefillMs: number;
  /** Source addresses whose failures are remembered (the oldest is forgotten beyond). */
  trackedAddresses: number;
}

export const DEFAULT_ADMISSION_LIMITS: AdmissionLimits = {
  knownInFlight: 10_000,
  otherInFlight: 64,
  otherInFlightPerAddress: 4,
  failureBurst: 10,
  failureRefillMs: 6_000,
  trackedAddresses: 10_000,
};

export type Lane = "known" | "other";

export type Admission = { ok: true; release: () => void } | { ok: false; reason: string };

/** Refusal messages (the agent retries after a jittered 5-15 s on any of them). */
export const BUSY = "busy, retry later";
export const THROTTLED = "too many failed attempts from this address, retry later";

interface Bucket {
  tokens: number;
  at: number;
}

export class HandshakeAdmission {
  private known = 0;
  private other = 0;
  private readonly otherByAddress = new Map<string, number>();
  /** Failure buckets in least-recently-touched order (a Map keeps insertion order). */
  private readonly buckets = new Map<string, Bucket>();
  readonly limits: AdmissionLimits;

  constructor(
    limits: Partial<AdmissionLimits> = {},
    private readonly now: () => number = Date.now,
  ) {
    this.limits = { ...DEFAULT_ADMISSION_LIMITS, ...limits };
  }

  /** Takes a place in the lane, or says why not. Call release() once the handshake is decided. */
  admit(address: string, lane: Lane): Admission {
    const key = addressKey(address);
    if (lane === "known") {
      if (this.known >= this.limits.knownInFlight) return { ok: false, reason: BUSY };
      this.known++;
      return { ok: true, release: once(() => this.known--) };
    }
    const mine = this.otherByAddress.get(key) ?? 0;
    // Each handshake in flight may still fail: it holds one of the address's failed attempts
    // until it is decided, so a refill lets one more guess through, not one per place in flight.
    if (this.buckets.has(key) && this.refilled(key).tokens - mine < 1) return { ok: false, reason: THROTTLED };
    if (this.other >= this.limits.otherInFlight || mine >= this.limits.otherInFlightPerAddress) return { ok: false, reason: BUSY };
    this.other++;
    this.otherByAddress.set(key, mine + 1);
    return {
      ok: true,
      release: once(() => {
        this.other--;
        const left = (this.otherByAddress.get(key) ?? 1) - 1;
        if (left > 0) this.otherByAddress.set(key, left);
        else this.otherByAddress.delete(key);
      }),
    };
  }

  /** Records a failed attempt (bad token, malformed handshake) from the address. */
  failed(address: string): void {
    const key = addressKey(address);
    const bucket = this.refilled(key);
    bucket.tokens = Math.max(0, bucket.tokens - 1);
    this.buckets.delete(key);
    this.buckets.set(key, bucket);
    while (this.buckets.size > this.limits.trackedAddresses) this.buckets.delete(this.buckets.keys().next().value!);
  }

  /** Whether the address has used up its failed attempts for now. */
  throttled(address: string): boolean {
    const key = addressKey(address);
    if (!this.buckets.has(key)) return false;
    return this.refilled(key).tokens < 1;
  }

  /** Forgets addresses whose bucket is full again (called now and then: memory stays small). */
  sweep(): void {
    for (const key of [...this.buckets.keys()]) {
      if (this.refilled(key).tokens >= this.limits.failureBurst) this.buckets.delete(key);
    }
  }

  /** Sizes, for tests and diagnostics. */
  stats(): { known: number; other: number; trackedAddresses: number } {
    return { known: this.known, other: this.other, trackedAddresses: this.buckets.size };
  }

  private refilled(key: string): Bucket {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.limits.failureBurst, at: now };
    const gained = Math.floor((now - bucket.at) / this.limits.failureRefillMs);
    if (gained > 0) {
      bucket.tokens = Math.min(this.limits.failureBurst, bucket.tokens + gained);
      bucket.at = bucket.tokens >= this.limits.failureBurst ? now : bucket.at + gained * this.limits.failureRefillMs;
    }
    return bucket;
  }
}

function once(f: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    f();
  };
}

/**
 * The unit an address is counted in: an IPv4 address (also when mapped into IPv6), or the
 * /64 prefix of an IPv6 address (one host usually holds a whole /64, so counting single
 * IPv6 addresses would let it cycle through them).
 */
export function addressKey(address: string): string {
  const a = address.trim().toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (mapped) return mapped[1]!;
  if (isIP(a) !== 6) return a;
  return expandIpv6(a).slice(0, 4).join(":") + "::/64";
}

function expandIpv6(a: string): string[] {
  const [head, tail] = a.split("%")[0]!.split("::") as [string, string | undefined];
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  // An embedded IPv4 tail counts as two groups.
  const last = right.length ? right[right.length - 1]! : left[left.length - 1];
  const v4 = last && last.includes(".") ? 1 : 0;
  const missing = tail === undefined ? 0 : 8 - left.length - right.length - v4;
  return [...left, ...Array.from({ length: missing }, () => "0"), ...right].map((g) => (g.includes(".") ? g : (parseInt(g, 16) || 0).toString(16)));
}
