import { randomUUID } from "node:crypto";
import type { Db } from "../db/client.js";

/**
 * Liveness across replicas by lease (issue 16): each replica renews one GatewayReplica row per
 * heartbeat, and the servers whose agents it holds carry its id (Server.gatewayReplica, written
 * with the hello). A heartbeat used to stamp lastSeenAt on every connected server: 10,000 row
 * writes every 10 s, which on PostgreSQL stalled job round trips in flight. Now a server's
 * lastSeenAt is written when something happens (hello, facts, disconnect, stale sweep), and
 * "seen until" for a reachable server is its replica's last beat (domain/server-seen.ts).
 */
export class ReplicaLease {
  /** This process: a new id per start, so a restarted replica never inherits its old rows' lease. */
  readonly id = randomUUID();

  constructor(private readonly db: Db) {}

  /** Renews this replica's lease (creates its row on the first beat). */
  async beat(at = new Date()): Promise<void> {
    await this.db.gatewayReplica.upsert({ where: { id: this.id }, create: { id: this.id, beatAt: at }, update: { beatAt: at } });
  }

  /** Replicas (this one excepted) whose last beat is older than the cutoff: they died, or stopped without a goodbye. */
  async lapsed(cutoff: Date): Promise<{ id: string; beatAt: Date }[]> {
    return this.db.gatewayReplica.findMany({ where: { beatAt: { lt: cutoff }, id: { not: this.id } }, select: { id: true, beatAt: true } });
  }

  /** Forgets a lapsed replica once its servers were swept (another replica may have done both already). */
  async forget(id: string, cutoff: Date): Promise<void> {
    await this.db.gatewayReplica.deleteMany({ where: { id, beatAt: { lt: cutoff } } });
  }
}
