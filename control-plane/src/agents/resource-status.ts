import { RESOURCE_TYPE_SERVICE, RESOURCE_TYPE_SERVICE_COMPONENT, type ResourceStatusReport } from "@capstan/shared";
import { aggregateServiceStatus } from "../services/services/status.js";
import type { Db } from "../db/client.js";
import { chunks } from "../db/chunks.js";
import type { ResourceChange } from "./fleet-stream.js";

/** A status change worth telling dashboards about, with where the resource lives (who may see it). */
export type StatusChange = ResourceChange;

interface StatusRow {
  id: number;
  uuid: string;
  teamId: number;
  status: string;
  environmentId: number;
  environment: { projectId: number };
}

/** The table behind one reported resource type (the capstan.resource.type label). */
interface StatusTable {
  find(where: { serverId: number; uuid?: { in: string[] } }): Promise<StatusRow[]>;
  update(ids: number[], serverId: number, status: string): Promise<unknown>;
}

const select = { id: true, uuid: true, teamId: true, status: true, environmentId: true, environment: { select: { projectId: true } } } as const;

function tables(db: Db): Record<"application" | "database", StatusTable> {
  return {
    application: {
      find: (where) => db.application.findMany({ where, select }),
      update: (ids, serverId, status) => db.application.updateMany({ where: { id: { in: ids }, serverId }, data: { status } }),
    },
    database: {
      find: (where) => db.standaloneDatabase.findMany({ where, select }),
      update: (ids, serverId, status) => db.standaloneDatabase.updateMany({ where: { id: { in: ids }, serverId }, data: { status } }),
    },
  };
}

/**
 * Stores what an agent reports about the resources on its server. Only resources of that
 * server are touched (the server id comes from the authenticated socket, never the report),
 * and only rows whose status changes are written, grouped by status: a minute's full report
 * of a quiet server is one read per kind of resource and no write.
 */
export async function applyStatusReport(db: Db, server: { id: number; uuid: string }, report: ResourceStatusReport): Promise<StatusChange[]> {
  const changes: StatusChange[] = [];
  const at = new Date().toISOString();
  for (const [type, table] of Object.entries(tables(db))) {
    const reported = new Map(report.resources.filter((r) => r.type === type).map((r) => [r.uuid, r.status]));
    if (!report.full && reported.size === 0) continue;
    const current = report.full
      ? await table.find({ serverId: server.id })
      : (await Promise.all(chunks([...reported.keys()]).map((uuids) => table.find({ serverId: server.id, uuid: { in: uuids } })))).flat();

    const byStatus = new Map<string, number[]>();
    for (const row of current) {
      // In a full report, a resource without containers on the server has none left.
      const status = reported.get(row.uuid) ?? (report.full ? "exited" : null);
      if (status === null || status === row.status) continue;
      byStatus.set(status, [...(byStatus.get(status) ?? []), row.id]);
      changes.push({
        teamId: row.teamId,
        environmentId: row.environmentId,
        projectId: row.environment.projectId,
        event: { uuid: row.uuid, type, status, server_uuid: server.uuid, at },
      });
    }
    for (const [status, ids] of byStatus) {
      for (const part of chunks(ids)) await table.update(part, server.id, status);
    }
  }
  changes.push(...(await applyServiceStatuses(db, server, report, at)));
  return changes;
}

/**
 * Services (issue 17): the agent reports each service (its compose project) and each of its
 * components (capstan.service.component). A reported service lists all its containers, so a
 * component of it that is not reported has none left (exited), as has every component of a
 * service missing from a full report. The service's status is the one rule of
 * services/services/status.ts over its components, never the agent's project status.
 */
async function applyServiceStatuses(db: Db, server: { id: number; uuid: string }, report: ResourceStatusReport, at: string): Promise<StatusChange[]> {
  const reportedServices = [...new Set(report.resources.filter((r) => r.type === RESOURCE_TYPE_SERVICE).map((r) => r.uuid))];
  if (!report.full && reportedServices.length === 0) return [];
  const componentStatus = new Map(report.resources.filter((r) => r.type === RESOURCE_TYPE_SERVICE_COMPONENT).map((r) => [r.uuid, r.status]));
  const serviceSelect = {
    ...select,
    components: { select: { id: true, uuid: true, status: true, excludeFromStatus: true }, orderBy: { id: "asc" } },
  } as const;
  const rows = report.full
    ? await db.service.findMany({ where: { serverId: server.id }, select: serviceSelect })
    : (await Promise.all(chunks(reportedServices).map((uuids) => db.service.findMany({ where: { serverId: server.id, uuid: { in: uuids } }, select: serviceSelect })))).flat();
  const changes: StatusChange[] = [];
  for (const row of rows) {
    const components = row.components.map((c) => ({ ...c, status: componentStatus.get(c.uuid) ?? "exited" }));
    for (const c of components) {
      const before = row.components.find((b) => b.id === c.id)!.status;
      if (before !== c.status) await db.serviceComponent.updateMany({ where: { id: c.id, serviceId: row.id }, data: { status: c.status } });
    }
    const status = aggregateServiceStatus(components);
    if (status === row.status) continue;
    await db.service.updateMany({ where: { id: row.id, serverId: server.id }, data: { status } });
    changes.push({
      teamId: row.teamId,
      environmentId: row.environmentId,
      projectId: row.environment.projectId,
      event: { uuid: row.uuid, type: RESOURCE_TYPE_SERVICE, status, server_uuid: server.uuid, at },
    });
  }
  return changes;
}
