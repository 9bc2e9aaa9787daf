import { NetworkStatus } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { JobRow } from "../jobs/queue.js";

/**
 * A network's removal as users see it (issue 15). DELETE /networks/{serverUuid}/{networkUuid}
 * (and the deletion of a network's environment) marks the record deleted and `deleting`, and
 * queues a network.remove job, in one transaction (services/networks/commands.ts). Until the server's
 * agent confirms the removal, the network is still on the host: the API shows it `pending`
 * with `deleting: true`, never `deleted` (an agent that is away may take hours to come back).
 * The job's end settles it: succeeded, the record is deleted for good; failed (or past its
 * deadline), the network may still be there, and the record is failed with the reason, as
 * NetworkOutcomes.afterRemove also says. Kept apart from services/networks/ so the rule stays
 * in one small place.
 */
export function shownNetworkStatus(row: { status: string; deleting: boolean }): NetworkStatus {
  return NetworkStatus.parse(row.status === "deleted" && row.deleting ? "pending" : row.status);
}

/** What the end of a network.remove job means for the records still waiting for it (an outcome handler, jobs/outcome-map.ts). */
export function networkRemovalEnded(db: Db): (job: JobRow) => Promise<void> {
  return async (job: JobRow) => {
    const name = nameOf(job);
    if (name === null) return;
    if (job.status === "succeeded") {
      await db.network.updateMany({ where: { serverId: job.serverId, name, deleting: true, status: "deleted" }, data: { deleting: false, reason: null } });
      return;
    }
    // One statement, whichever hook runs first: never a moment where a removal that failed reads as done.
    await db.network.updateMany({
      where: { serverId: job.serverId, name, deleting: true },
      data: { deleting: false, status: "failed", reason: `removal failed: ${job.error ?? "no reason"}`.slice(0, 1000) },
    });
  };
}

function nameOf(job: JobRow): string | null {
  try {
    const p = JSON.parse(job.payload) as { name?: unknown } | null;
    return typeof p?.name === "string" ? p.name : null;
  } catch {
    return null;
  }
}
