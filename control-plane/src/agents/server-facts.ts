import { engineUsability, type HostFacts } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { JobQueue } from "../jobs/queue.js";
import { PREPARE_TIMEOUT_MS } from "../services/servers.js";

/**
 * What an agent's facts change for its server: is_usable follows them (GET .../validate changes
 * nothing), and a server whose preparation failed because it had no engine then (an agent
 * started before Docker was installed) is prepared again once its engine answers. Returns the
 * data to store with the facts.
 */
export function factsData(facts: HostFacts): { facts: string; isUsable: boolean } {
  return { facts: JSON.stringify(facts), isUsable: engineUsability(facts).usable };
}

/** Queues server.prepare again when the server is usable now and its last one failed; true when queued. */
export async function reprepareIfFailed(db: Db, jobs: JobQueue, serverId: number, facts: HostFacts): Promise<boolean> {
  if (!engineUsability(facts).usable) return false;
  const last = await db.job.findFirst({ where: { serverId, type: "server.prepare" }, orderBy: { createdAt: "desc" }, select: { status: true } });
  if (last?.status !== "failed") return false;
  const destinations = await db.destination.findMany({ where: { serverId }, select: { networkName: true } });
  const networks = [...new Set(destinations.map((d) => d.networkName))];
  if (!networks.length) return false;
  await jobs.enqueue(db, serverId, "server.prepare", { networks }, PREPARE_TIMEOUT_MS);
  jobs.nudge(serverId);
  return true;
}
