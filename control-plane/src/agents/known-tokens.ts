import { toInt, type SqlReader } from "../db/reader.js";

/** Hex characters of a token hash kept per server: 64 bits, plenty to tell tokens apart. */
const KEPT = 16;
/** Rows read per turn of the event loop. */
const PAGE = 2000;

/**
 * The agent tokens this replica knows of, as the first 64 bits of their SHA-256 (the stored
 * hash, never the token): a check that costs no database work and that a guessed token
 * cannot pass, so the handshakes of known agents get their own lane (admission.ts).
 *
 * It is an aid to admission, not the authentication: a handshake in the known lane is still
 * checked against the servers table. Kept current by a full reload (every 30 s), by every
 * successful check (a server added or a token rotated on another replica is learnt at its
 * first handshake) and by every failed one (a rotated or deleted token is forgotten).
 */
export class KnownAgentTokens {
  private known = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  /** Reads through the plain read path (db/reader.ts): one statement prepared once, rows as arrays. */
  constructor(private readonly reader: SqlReader) {}

  /** Loads the servers' token hashes, then reloads them every `everyMs`. */
  async start(everyMs: number, onError: (err: unknown) => void = () => {}): Promise<void> {
    await this.reload();
    this.timer = setInterval(() => void this.reload().catch(onError), everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Reads every server's hash, 2,000 rows per turn of the event loop (no long stall at 100,000). */
  async reload(): Promise<void> {
    const next = new Set<string>();
    for (let after = 0; ; ) {
      const rows = await this.reader.rows<[unknown, string]>(`SELECT "id", "agentTokenHash" FROM "Server" WHERE "id" > ? ORDER BY "id" LIMIT ${PAGE}`, [after]);
      for (const [, hash] of rows) next.add(hash.slice(0, KEPT));
      if (rows.length < PAGE) break;
      after = toInt(rows[rows.length - 1]![0]);
      await new Promise((r) => setImmediate(r));
    }
    this.known = next;
  }

  has(tokenHash: string): boolean {
    return this.known.has(tokenHash.slice(0, KEPT));
  }

  add(tokenHash: string): void {
    this.known.add(tokenHash.slice(0, KEPT));
  }

  forget(tokenHash: string): void {
    this.known.delete(tokenHash.slice(0, KEPT));
  }

  get size(): number {
    return this.known.size;
  }
}
