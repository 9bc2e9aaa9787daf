import { engineUsability, type HostFacts } from "@capstan/shared";
import type { Db } from "../db/client.js";
import { PADDED_IN_MAX, paddedIn, toInt, type SqlReader } from "../db/reader.js";
import { chunks } from "../db/chunks.js";
import type { JobQueue } from "../jobs/queue.js";
import { PREPARE_TIMEOUT_MS } from "../services/servers.js";

/**
 * What an agent's facts change for its server: is_usable follows them (GET .../validate changes
 * nothing), and a server whose preparation failed because it had no engine then (an agent
 * started before Docker was installed) is prepared again once its engine answers.
 */
export function isUsableFacts(facts: HostFacts): boolean {
  return engineUsability(facts).usable;
}

/**
 * Queues server.prepare again for those of these servers (usable now) whose last preparation
 * failed; answers how many were queued. One read for the whole group: a fleet reconnecting
 * after a restart says hello thousands of times within seconds. With `reader` (db/reader.ts)
 * the read is a statement prepared once per list size instead of Prisma's planning per call
 * (a third of a millisecond of CPU, once per group of hellos before the gateway gathered them).
 */
export async function reprepareFailed(db: Db, jobs: JobQueue, serverIds: number[], reader?: SqlReader): Promise<number> {
  if (!serverIds.length) return 0;
  const last = new Map<number, string>();
  if (reader) {
    for (const ids of chunks(serverIds, PADDED_IN_MAX)) {
      const { list, values } = paddedIn(ids, -1);
      const rows = await reader.rows<[unknown, string]>(
        `SELECT "serverId", "status" FROM "Job" WHERE "serverId" IN (${list}) AND "type" = 'server.prepare' ORDER BY "createdAt" DESC, "id" DESC`,
        values,
      );
      for (const [serverId, status] of rows) if (!last.has(toInt(serverId))) last.set(toInt(serverId), status);
    }
  } else {
    const prepares = await db.job.findMany({
      where: { serverId: { in: serverIds }, type: "server.prepare" },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      select: { serverId: true, status: true },
    });
    for (const p of prepares) if (!last.has(p.serverId)) last.set(p.serverId, p.status);
  }
  const failed = [...last].filter(([, status]) => status === "failed").map(([id]) => id);
  if (!failed.length) return 0;
  const destinations = await db.destination.findMany({ where: { serverId: { in: failed } }, select: { serverId: true, networkName: true } });
  let queued = 0;
  for (const serverId of failed) {
    const networks = [...new Set(destinations.filter((d) => d.serverId === serverId).map((d) => d.networkName))];
    if (!networks.length) continue;
    await jobs.enqueue(db, serverId, "server.prepare", { networks }, PREPARE_TIMEOUT_MS);
    jobs.nudge(serverId);
    queued++;
  }
  return queued;
}
