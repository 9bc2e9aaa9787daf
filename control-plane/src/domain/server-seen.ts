import type { Db } from "../db/client.js";

/*
 * A reachable server's row is not stamped by every heartbeat (agents/replica-lease.ts): the
 * replica holding its agent renews one lease row, and the server is seen as long as that lease.
 */

/** Every replica's last beat, for showing when reachable servers were last vouched for. */
export async function replicaBeats(db: Db): Promise<Map<string, Date>> {
  const rows = await db.gatewayReplica.findMany({ select: { id: true, beatAt: true } });
  return new Map(rows.map((r) => [r.id, r.beatAt]));
}

/**
 * When a server was last seen: its own lastSeenAt (hello, facts report, disconnect), or for a
 * reachable server the last beat of the replica holding its agent, whichever is later.
 */
export function seenAt(server: { status: string; lastSeenAt: Date | null; gatewayReplica: string | null }, beats: ReadonlyMap<string, Date>): Date | null {
  const beat = server.status === "reachable" && server.gatewayReplica ? beats.get(server.gatewayReplica) : undefined;
  if (!beat) return server.lastSeenAt;
  return server.lastSeenAt && server.lastSeenAt > beat ? server.lastSeenAt : beat;
}
