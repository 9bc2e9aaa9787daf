import { DATABASE_ENGINE_FACTS, DatabaseEngine, type JobType, type ResourceBackupPayload } from "@capstan/shared";
import { parseCompose } from "../../compose/index.js";
import type { Db, Prisma } from "../../db/client.js";
import type { LOCK } from "../../db/locks.js";
import type { EnvironmentRef, Need, TeamScope } from "../../domain/scope.js";
import { Invalid, NotFound } from "../../domain/errors.js";
import { withStorages } from "../services/lifecycle.js";
import { BackupLookups, OPEN, type ScheduleRow } from "./common.js";

// ---- resource backups of services and databases, restores into another resource (issue 19, w8/rbsources) ----

/** The kinds of resource a volume backup copies (spec 4.10's resource_type, platform_instance aside). */
export type SourceKind = "application" | "service" | "database";
export const SOURCE_KINDS: readonly SourceKind[] = ["application", "service", "database"];

/** The BackupSchedule column naming a resource backup's resource, by kind. */
export const SOURCE_COLUMN = { application: "applicationId", service: "serviceId", database: "databaseId" } as const satisfies Record<SourceKind, keyof ScheduleRow>;

const NOUN: Record<SourceKind, string> = { application: "Application", service: "Service", database: "Database" };

/**
 * The resource of a resource backup schedule (null: a database's dump schedule, whose backupType
 * is null though it has a databaseId, or a platform_instance schedule).
 */
export function sourceOf(row: Pick<ScheduleRow, "backupType" | "applicationId" | "serviceId" | "databaseId">): { kind: SourceKind; id: number } | null {
  if (row.backupType === null || row.backupType === "platform_instance") return null;
  for (const kind of SOURCE_KINDS) {
    const id = row[SOURCE_COLUMN[kind]];
    if (id !== null) return { kind, id };
  }
  return null;
}

/** Where a resource backup's schedules are: its column, and a backup type (a database's dumps have none). */
export const schedulesOf = (kind: SourceKind, id: number): Prisma.BackupScheduleWhereInput => ({ [SOURCE_COLUMN[kind]]: id, backupType: { not: null } });

/** A resource whose volumes are backed up or restored: what runs and restores need of it. */
export interface SourceResource {
  kind: SourceKind;
  id: number;
  uuid: string;
  name: string;
  serverId: number;
  server: { id: number; name: string; status: string };
  environment: EnvironmentRef;
}

type Volume = ResourceBackupPayload["volumes"][number];

const select = { id: true, uuid: true, name: true, serverId: true, server: { select: { id: true, name: true, status: true } }, environment: { select: { id: true, projectId: true } } } as const;

/**
 * The run lock of a resource's backups and restores: a database's is the one its dump backups
 * and restores take (a volume run and a dump restore never interleave), a service's its own.
 */
export const runLock = (r: { kind: SourceKind; id: number }): { kind: keyof typeof LOCK; id: number } => ({
  kind: r.kind === "application" ? "applicationRuns" : r.kind === "service" ? "serviceRuns" : "databaseRuns",
  id: r.id,
});

/** The key prefix of a resource backup schedule's archives in its storage: `<storage prefix><resource uuid>/<schedule uuid>/` (remote retention counts only these). */
export const resourceKeyPrefix = (storagePrefix: string, resourceUuid: string, scheduleUuid: string) => `${storagePrefix}${resourceUuid}/${scheduleUuid}/`;

/** Lifecycle jobs of a service or database that a restore must not run beside (its start, stop, redeploy). */
const LIFECYCLE_JOBS: Record<Exclude<SourceKind, "application">, JobType[]> = { service: ["service.deploy", "service.action"], database: ["db.deploy", "db.action"] };
const OPEN_DEPLOYMENTS = ["queued", "in_progress"];

/** The uuid a job payload names its resource by (service.*, db.*, resource.*), null when none. */
function payloadUuid(payload: unknown): string | null {
  const p = payload as { service?: { uuid?: unknown }; db?: { uuid?: unknown }; resource?: { uuid?: unknown } } | null;
  const uuid = p?.service?.uuid ?? p?.db?.uuid ?? p?.resource?.uuid;
  return typeof uuid === "string" ? uuid : null;
}

/**
 * The resources of resource backups: resolved in the caller's team and checked for a need
 * (another team's is a 404), loaded for runs, their volumes, and the clashes of their runs.
 */
export class ResourceSources {
  constructor(private readonly lookups: BackupLookups) {}

  private get db(): Db {
    return this.lookups.db;
  }

  /** The resource by the integer id a client sent (POST /resource-backups resource_id), checked for `need`. */
  async resolve(scope: TeamScope, kind: SourceKind, id: number, need: Need): Promise<SourceResource> {
    const found = await this.load(kind, id, scope.teamId);
    if (!found) throw new NotFound(NOUN[kind]);
    await this.check(scope, found, need);
    return found;
  }

  /** Checks the caller's access to a resource of the team (by its uuid, through the scope's resolver of its kind). */
  async check(scope: TeamScope, r: { kind: SourceKind; uuid: string }, need: Need): Promise<void> {
    if (r.kind === "application") await scope.application(r.uuid, need);
    else if (r.kind === "service") await scope.service(r.uuid, need);
    else await scope.database(r.uuid, need);
  }

  /**
   * The target of a restore into another resource (target_uuid): a resource of the same kind in
   * the caller's team, with manage permission. A uuid of another kind of the team is a 422; one
   * that names nothing of the team a 404.
   */
  async target(scope: TeamScope, kind: SourceKind, uuid: string): Promise<SourceResource> {
    const where = { uuid, teamId: scope.teamId };
    const ref = await this.find(kind, where);
    if (!ref) {
      for (const other of SOURCE_KINDS.filter((k) => k !== kind)) {
        if (await this.find(other, where)) throw new Invalid({ target_uuid: [`This is a ${other}; a backup of a ${kind} restores into a ${kind} only.`] });
      }
      throw new NotFound(NOUN[kind]);
    }
    await this.check(scope, ref, "manage");
    return ref;
  }

  /** The first resource of a kind matching `where` (id or uuid, and the team). */
  private async find(kind: SourceKind, where: { id?: number; uuid?: string; teamId?: number }): Promise<SourceResource | null> {
    const ref =
      kind === "application"
        ? await this.db.application.findFirst({ where, select })
        : kind === "service"
          ? await this.db.service.findFirst({ where, select })
          : await this.db.standaloneDatabase.findFirst({ where, select });
    return ref ? { kind, ...ref } : null;
  }

  /** The resource by id (no access check: runs of the cron scheduler, and after a check); null when it is gone. */
  async load(kind: SourceKind, id: number, teamId?: number): Promise<SourceResource | null> {
    return this.find(kind, { id, ...(teamId !== undefined ? { teamId } : {}) });
  }

  /**
   * The volumes a backup of the resource copies, each named as its folder in the archive:
   * an application's persistent storages; a service's named volumes (those its compose file
   * declares and its storages), each once, with the component that mounts it (the first one in
   * the file); a standalone database's data volume, `data` at its engine's data directory.
   * Bind mounts of services are host files, not the service's volumes, and are left out.
   */
  async volumes(r: Pick<SourceResource, "kind" | "id">): Promise<Volume[]> {
    if (r.kind === "application") {
      const rows = await this.db.volume.findMany({ where: { applicationId: r.id }, orderBy: { id: "asc" }, select: { name: true, mountPath: true } });
      return rows.map((v) => ({ name: v.name, mount_path: v.mountPath }));
    }
    if (r.kind === "database") {
      const row = await this.db.standaloneDatabase.findUnique({ where: { id: r.id }, select: { engine: true } });
      const engine = DatabaseEngine.safeParse(row?.engine);
      return engine.success ? [{ name: "data", mount_path: DATABASE_ENGINE_FACTS[engine.data].dataDir }] : [];
    }
    const service = await this.db.service.findUnique({ where: { id: r.id }, select: { composeRendered: true, components: { select: { name: true, uuid: true } } } });
    if (!service) return [];
    let doc;
    try {
      doc = await withStorages(this.db, r.id, parseCompose(this.lookups.deps.box.open(service.composeRendered)));
    } catch {
      return [];
    }
    const named = new Set(doc.volumes.map((v) => v.name));
    const out: Volume[] = [];
    for (const s of doc.services) {
      const component = service.components.find((c) => c.name === s.name);
      if (!component) continue;
      for (const m of s.mounts) {
        if (m.type !== "volume" || m.source === null || !named.has(m.source) || out.some((v) => v.name === m.source)) continue;
        out.push({ name: m.source, mount_path: m.target, component: component.uuid });
      }
    }
    return out;
  }

  /**
   * Why a backup or restore of the resource cannot start now (null: it can): a restore into it
   * (from any backup, its own or another resource's: the open resource.restore jobs naming it),
   * a restore or backup of one of its own schedules (`backups`: also its backups), and for a
   * restore a deployment, start or stop of it.
   */
  async clash(tx: Db | Prisma.TransactionClient, r: SourceResource, what: "backup" | "restore"): Promise<string | null> {
    const jobs = this.lookups.deps.jobs;
    const ownRestores = r.kind === "database" ? { schedule: { databaseId: r.id } } : { schedule: schedulesOf(r.kind, r.id) };
    if (await tx.backupExecution.count({ where: { ...ownRestores, restoreStatus: { in: OPEN } } })) return `a restore of this ${r.kind} is running`;
    const restoring = await jobs.openJobs(tx, { serverIds: [r.serverId], types: ["resource.restore"] });
    if (restoring.some((j) => payloadUuid(j.payload) === r.uuid)) return `a restore into this ${r.kind} is running`;
    if (what === "backup") return null;
    if (await tx.backupExecution.count({ where: { ...ownRestores, status: { in: OPEN } } })) return `a backup of this ${r.kind} is running; restore once it has ended`;
    if (r.kind === "application") {
      if (await tx.deployment.count({ where: { applicationId: r.id, status: { in: OPEN_DEPLOYMENTS } } })) return "a deployment of this application is running; restore once it has ended";
      return null;
    }
    const lifecycle = await jobs.openJobs(tx, { serverIds: [r.serverId], types: LIFECYCLE_JOBS[r.kind] });
    if (lifecycle.some((j) => payloadUuid(j.payload) === r.uuid)) return `this ${r.kind} is being deployed, started or stopped; restore once that has ended`;
    return null;
  }
}
