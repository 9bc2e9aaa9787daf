import { DeploymentStatus, DeploymentTrigger } from "@capstan/shared";
import type { Db, Prisma } from "../../db/client.js";
import { pageSql, toInt, toIso, type SqlReader, type Window } from "../../db/reader.js";
import { wholeRows } from "../../db/relations.js";
import type { TeamScope } from "../../domain/scope.js";

export const withApp = {
  application: { select: { uuid: true, name: true, environmentId: true } },
  server: { select: { uuid: true } },
} satisfies Prisma.DeploymentInclude;
export type DeploymentRow = Prisma.DeploymentGetPayload<{ include: typeof withApp }>;

export interface DeploymentListRow {
  uuid: string;
  applicationUuid: string;
  applicationName: string;
  status: DeploymentStatus;
  commit: string | null;
  commitMessage: string | null;
  branch: string | null;
  createdAt: string;
  finishedAt: string | null;
}

export interface DeploymentDetailRow extends DeploymentListRow {
  trigger: DeploymentTrigger;
  force: boolean;
  serverUuid: string;
  startedAt: string | null;
  reason: string | null;
  logs: string;
}


/** The reads of deployments (spec 4.7, section 3): lists, one deployment, its log stream's state. */
export class DeploymentQueries {
  constructor(private readonly deps: { db: Db; reader: SqlReader }) {}

  private get db(): Db {
    return this.deps.db;
  }

  /**
   * The team's deployments the caller may see (those of applications in environments it can
   * see), newest first, in one statement through the plain read path with the team scope's
   * visibility rule (TeamScope.visibleRows).
   */
  async list(scope: TeamScope, window: Window): Promise<DeploymentListRow[]> {
    const { sql, params } = this.listSql(scope, `d."uuid", a."uuid" AS "applicationUuid", a."name" AS "applicationName", d."status", d."commit",
        d."commitMessage", d."branch", d."createdAt", d."finishedAt"`);
    let text = `${sql} ORDER BY d."id" DESC`;
    text += pageSql(window, params);
    const rows = await this.deps.reader.all<Record<string, unknown>>(text, params);
    return rows.map((r) => ({
      uuid: r.uuid as string,
      applicationUuid: r.applicationUuid as string,
      applicationName: r.applicationName as string,
      status: DeploymentStatus.parse(r.status),
      commit: (r.commit as string | null) ?? null,
      commitMessage: (r.commitMessage as string | null) ?? null,
      branch: (r.branch as string | null) ?? null,
      createdAt: toIso(r.createdAt),
      finishedAt: r.finishedAt === null || r.finishedAt === undefined ? null : toIso(r.finishedAt),
    }));
  }

  async count(scope: TeamScope): Promise<number> {
    const { sql, params } = this.listSql(scope, `COUNT(*) AS "n"`);
    const [row] = await this.deps.reader.all<{ n: unknown }>(sql, params);
    return toInt(row!.n);
  }

  private listSql(scope: TeamScope, columns: string): { sql: string; params: (string | number)[] } {
    const visible = scope.visibleRows(`d."teamId"`, "environment");
    const sql = `SELECT ${columns} FROM "Deployment" d
      JOIN "Application" a ON a."id" = d."applicationId"
      JOIN "Environment" e ON e."id" = a."environmentId"
      WHERE ${visible.sql}`;
    return { sql, params: visible.params };
  }

  async get(scope: TeamScope, uuid: string): Promise<DeploymentDetailRow> {
    const d = await scope.deployment(uuid, "view");
    const log = d.jobId ? await this.db.job.findUnique({ where: { id: d.jobId }, select: { log: true } }) : null;
    return { ...detailOf(d), logs: log?.log ?? "" };
  }

  /** A deployment's identity for the log stream (visibility checked). */
  async forStream(scope: TeamScope, uuid: string): Promise<{ id: number }> {
    const d = await scope.deployment(uuid, "view");
    return { id: d.id };
  }

  /** Status and job of a deployment, read fresh (the log stream polls this). */
  async streamState(id: number): Promise<{ status: string; jobId: string | null } | null> {
    return this.db.deployment.findUnique({ where: { id }, select: { status: true, jobId: true } });
  }

  async countForApplication(scope: TeamScope, applicationUuid: string): Promise<number> {
    const app = await scope.application(applicationUuid, "view");
    return this.db.deployment.count({ where: { applicationId: app.id } });
  }

  async listForApplication(scope: TeamScope, applicationUuid: string, window: Window): Promise<DeploymentListRow[]> {
    const app = await scope.application(applicationUuid, "view");
    const rows = await this.db.deployment.findMany({ where: { applicationId: app.id }, orderBy: { id: "desc" }, include: withApp, ...window });
    // Without their application, they were deleted with it while being read (db/relations.ts).
    return wholeRows(rows, ["application", "server"]).map(listOf);
  }
}

function listOf(d: DeploymentRow): DeploymentListRow {
  return {
    uuid: d.uuid,
    applicationUuid: d.application.uuid,
    applicationName: d.application.name,
    status: DeploymentStatus.parse(d.status),
    commit: d.commit,
    commitMessage: d.commitMessage,
    branch: d.branch,
    createdAt: d.createdAt.toISOString(),
    finishedAt: d.finishedAt?.toISOString() ?? null,
  };
}

function detailOf(d: DeploymentRow): Omit<DeploymentDetailRow, "logs"> {
  return {
    ...listOf(d),
    trigger: DeploymentTrigger.parse(d.trigger),
    force: d.force,
    serverUuid: d.server.uuid,
    startedAt: d.startedAt?.toISOString() ?? null,
    reason: d.reason,
  };
}
