import type { ResourceStatusEvent, ResourceStatusReport } from "@capstan/shared";
import type { Db } from "../db/client.js";
import { chunks } from "../db/chunks.js";

/** A status change worth telling dashboards about. */
export interface StatusChange {
  teamId: number;
  event: ResourceStatusEvent;
}

/**
 * Stores what an agent reports about the resources on its server. Only resources of that
 * server are touched (the server id comes from the authenticated socket, never the report),
 * and only rows whose status changes are written, grouped by status: a minute's full report
 * of a quiet server is one read and no write.
 */
export async function applyStatusReport(db: Db, server: { id: number; uuid: string }, report: ResourceStatusReport): Promise<StatusChange[]> {
  const reported = new Map(report.resources.filter((r) => r.type === "application").map((r) => [r.uuid, r.status]));
  const current = report.full
    ? await db.application.findMany({ where: { serverId: server.id }, select: { id: true, uuid: true, teamId: true, status: true } })
    : (
        await Promise.all(
          chunks([...reported.keys()]).map((uuids) =>
            db.application.findMany({ where: { serverId: server.id, uuid: { in: uuids } }, select: { id: true, uuid: true, teamId: true, status: true } }),
          ),
        )
      ).flat();

  const byStatus = new Map<string, number[]>();
  const changes: StatusChange[] = [];
  const at = new Date().toISOString();
  for (const app of current) {
    // In a full report, an application without containers on the server has none left.
    const status = reported.get(app.uuid) ?? (report.full ? "exited" : null);
    if (status === null || status === app.status) continue;
    byStatus.set(status, [...(byStatus.get(status) ?? []), app.id]);
    changes.push({ teamId: app.teamId, event: { uuid: app.uuid, type: "application", status, server_uuid: server.uuid, at } });
  }
  for (const [status, ids] of byStatus) {
    for (const part of chunks(ids)) await db.application.updateMany({ where: { id: { in: part }, serverId: server.id }, data: { status } });
  }
  return changes;
}
