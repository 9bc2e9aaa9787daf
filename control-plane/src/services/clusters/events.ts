import { createHash } from "node:crypto";
import type { SwarmEvent } from "@capstan/shared";
import type { Db } from "../../db/client.js";
import { isUniqueViolation } from "../../db/errors.js";

/**
 * Cluster events (issue 20, w7/events; docs/clusters.md "Events", docs/decisions.md): the
 * managers' node, service, secret and config events, collected by finite swarm.events jobs
 * (no stream stays open) and stored once per cluster.
 */

/** Retention: events older than this go, and a cluster keeps at most EVENTS_KEPT of the newest. */
export const EVENTS_MAX_AGE_MS = 7 * 24 * 3_600_000;
export const EVENTS_KEPT = 10_000;
/** Rows one retention pass deletes per cluster (the next pass goes on). */
export const RETENTION_BATCH = 1_000;
/** A cluster's events are collected at least this often while a manager's agent is connected (the engine keeps only its last 256). */
export const COLLECT_EVERY_MS = 30_000;
/** GET /events collects first when the last collection started longer ago than this... */
export const FRESH_MS = 3_000;
/** ...and waits at most this long for it before answering what is stored. */
export const FRESH_WAIT_MS = 5_000;
/** The first collection of a cluster starts this far back. */
export const FIRST_WINDOW_MS = 3_600_000;

/** 20 zero-padded digits: nanoseconds ordered as text. */
export const padNano = (nano: string | bigint) => BigInt(nano).toString().padStart(20, "0");
export const msToNano = (ms: number) => padNano(BigInt(Math.floor(ms)) * 1_000_000n);

/** RFC 3339 in UTC with the nanoseconds. */
export function nanoToRfc3339(nano: string): string {
  const n = BigInt(nano);
  const seconds = n / 1_000_000_000n;
  const iso = new Date(Number(seconds) * 1000).toISOString().slice(0, 19);
  return `${iso}.${(n % 1_000_000_000n).toString().padStart(9, "0")}Z`;
}

/** The same engine event reported by two managers (or by two overlapping collections) has one key. */
export function dedupeKey(e: SwarmEvent): string {
  const attrs = Object.keys(e.attributes)
    .sort()
    .map((k) => [k, e.attributes[k]]);
  return createHash("sha256").update(JSON.stringify([e.type, e.action, e.actor_id, padNano(e.time_nano), attrs])).digest("hex");
}

/** Stores what a manager answered, each event once per cluster; answers how many were new. */
export async function storeEvents(db: Db, clusterId: number, events: readonly SwarmEvent[]): Promise<number> {
  const rows = new Map<string, ReturnType<typeof rowOf>>();
  for (const e of events) rows.set(dedupeKey(e), rowOf(clusterId, e));
  let added = 0;
  const keys = [...rows.keys()];
  for (let i = 0; i < keys.length; i += 500) {
    const batch = keys.slice(i, i + 500);
    const known = new Set((await db.clusterEvent.findMany({ where: { clusterId, dedupeKey: { in: batch } }, select: { dedupeKey: true } })).map((r) => r.dedupeKey));
    const fresh = batch.filter((k) => !known.has(k)).map((k) => rows.get(k)!);
    if (!fresh.length) continue;
    try {
      added += (await db.clusterEvent.createMany({ data: fresh })).count;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      // A concurrent collection stored some of them first: one by one, each at most once.
      for (const row of fresh) {
        await db.clusterEvent.upsert({ where: { clusterId_dedupeKey: { clusterId, dedupeKey: row.dedupeKey } }, create: row, update: {}, select: { id: true } });
      }
    }
  }
  return added;
}

function rowOf(clusterId: number, e: SwarmEvent) {
  const timeNano = padNano(e.time_nano);
  return {
    clusterId,
    timeNano,
    time: new Date(Number(BigInt(timeNano) / 1_000_000n)),
    type: e.type,
    action: e.action,
    actorId: e.actor_id,
    attributes: JSON.stringify(e.attributes),
    dedupeKey: dedupeKey(e),
  };
}

/** One bounded retention pass over every cluster: events past the age, then past the count (newest kept). Answers rows deleted. */
export async function pruneEvents(db: Db, now = Date.now()): Promise<number> {
  let deleted = 0;
  const old = await db.clusterEvent.findMany({ where: { time: { lt: new Date(now - EVENTS_MAX_AGE_MS) } }, select: { id: true }, take: RETENTION_BATCH });
  if (old.length) deleted += (await db.clusterEvent.deleteMany({ where: { id: { in: old.map((r) => r.id) } } })).count;
  const crowded = await db.clusterEvent.groupBy({ by: ["clusterId"], _count: { _all: true }, having: { clusterId: { _count: { gt: EVENTS_KEPT } } } });
  for (const c of crowded) {
    const extra = await db.clusterEvent.findMany({
      where: { clusterId: c.clusterId },
      orderBy: [{ timeNano: "desc" }, { id: "desc" }],
      skip: EVENTS_KEPT,
      take: RETENTION_BATCH,
      select: { id: true },
    });
    if (extra.length) deleted += (await db.clusterEvent.deleteMany({ where: { id: { in: extra.map((r) => r.id) } } })).count;
  }
  return deleted;
}
