import type { z } from "zod";
import { CONFIGURATION_MAX_BYTES, ResourceRestorePayload, ResourceRestoreResult, hostsOverlap, parseDomains, type ResourceJobBackupType } from "@capstan/shared";
import type { Db, Prisma } from "../../db/client.js";
import type { TeamScope } from "../../domain/scope.js";
import { Forbidden } from "../../domain/errors.js";
import { newUuid } from "../../lib/ids.js";
import { openPayload } from "../../jobs/payload.js";
import type { JobRow } from "../../jobs/queue.js";
import { assertMayAddBindMounts } from "../bind-mounts.js";
import { BackupLookups, OPEN, PayloadError, safeJson } from "./common.js";
import { sourceOf, type SourceKind } from "./resource-sources.js";

// ---- configuration and full resource backups (issue 19, w8/rbconfig) ----

type Tx = Prisma.TransactionClient;

/** Why a configuration document cannot be applied (the restore fails with it; nothing changed). */
export class ConfigurationRefused extends Error {}

/** What the restore's caller could do, decided when the restore was asked for (its outcome has no caller). */
export interface ApplyRights {
  mayAddBindMounts: boolean;
  backupType: ResourceJobBackupType;
}

/**
 * The configuration document of one kind of resource (application-configuration.ts,
 * database-configuration.ts, services/services/configuration.ts): `document` writes it when a
 * configuration or full run is prepared (PayloadError: why the run cannot start). On restore,
 * `plan` reads and checks it outside any transaction (ConfigurationRefused: why not); `check`
 * runs first in the transaction that records the restore's success (its locks, then what may
 * have changed since the plan: a refusal is returned, never thrown); `write` writes the
 * document there; `applied` runs after the commit.
 */
export interface ConfigurationKind<P = any, W = any> {
  document(resourceId: number, at: Date): Promise<string>;
  plan(resourceId: number, text: string, rights: ApplyRights): Promise<P>;
  check(tx: Tx, plan: P): Promise<string | null>;
  write(tx: Tx, plan: P): Promise<W>;
  applied(plan: P, wrote: W): Promise<void>;
}

/**
 * The configuration kinds, by source kind. A service's is bound once the service layer exists
 * (services/index.ts: ServiceService is built after, and on top of, the backups).
 */
export class ResourceConfigurations {
  private readonly kinds = new Map<SourceKind, ConfigurationKind>();

  constructor(kinds: Partial<Record<SourceKind, ConfigurationKind>>) {
    for (const [k, v] of Object.entries(kinds)) this.bind(k as SourceKind, v);
  }

  bind(kind: SourceKind, configuration: ConfigurationKind): void {
    this.kinds.set(kind, configuration);
  }

  /** The kind's configuration; null when this instance has none (a configuration backup of it cannot run or be applied). */
  of(kind: SourceKind): ConfigurationKind | null {
    return this.kinds.get(kind) ?? null;
  }
}

/** The document's uuid for a re-created row when no row has it now, else a new one. */
export async function freeUuid(tx: Tx, table: "env" | "volume" | "serviceStorage", uuid: string): Promise<string> {
  const where = { where: { uuid } };
  const taken = table === "env" ? await tx.envVar.count(where) : table === "volume" ? await tx.volume.count(where) : await tx.serviceStorage.count(where);
  return taken ? newUuid() : uuid;
}

/** A variable of a document: its key and preview flag name it; `data` is what the row is given (the sealed value, flags). */
export interface DocumentVariable {
  uuid: string;
  key: string;
  isPreview: boolean;
  data: { value: string; isBuildTime?: boolean; isGenerated?: boolean };
}

/**
 * Resets an owner's variables to a document's, matched by key and preview flag: changed ones get
 * the document's value and flags, missing ones are re-created (with their old uuid when free),
 * added ones are removed.
 */
export async function resetVariables(tx: Tx, owner: { applicationId: number } | { databaseId: number } | { serviceId: number }, wanted: DocumentVariable[]): Promise<void> {
  const name = (key: string, preview: boolean) => `${key}\u0000${preview}`;
  const rows = await tx.envVar.findMany({ where: owner, select: { id: true, key: true, isPreview: true } });
  const names = new Set(wanted.map((e) => name(e.key, e.isPreview)));
  const gone = rows.filter((e) => !names.has(name(e.key, e.isPreview)));
  if (gone.length) await tx.envVar.deleteMany({ where: { id: { in: gone.map((e) => e.id) } } });
  const current = new Map(rows.map((e) => [name(e.key, e.isPreview), e]));
  for (const e of wanted) {
    const row = current.get(name(e.key, e.isPreview));
    if (row) await tx.envVar.update({ where: { id: row.id }, data: e.data });
    else await tx.envVar.create({ data: { ...e.data, ...owner, uuid: await freeUuid(tx, "env", e.uuid), key: e.key, isPreview: e.isPreview } });
  }
}

/**
 * A document's text, checked as a restore will check it (a document this version could not
 * restore is never written) and within the size a backup carries (`what`: "the database's").
 */
export function documentText<T>(schema: z.ZodType<T>, doc: T, what: string): string {
  const checked = schema.safeParse(doc);
  if (!checked.success) throw new PayloadError(`${what} configuration does not fit the configuration document (${checked.error.issues[0]?.path.join(".")}: ${checked.error.issues[0]?.message})`);
  const text = JSON.stringify(checked.data);
  const size = Buffer.byteLength(text, "utf8");
  if (size > CONFIGURATION_MAX_BYTES) throw new PayloadError(`${what} configuration document has ${size} bytes, more than the ${CONFIGURATION_MAX_BYTES} a backup carries`);
  return text;
}

/** The hosts an fqdn list names (none when it does not parse). */
export const hostsOf = (fqdn: string | null): string[] => {
  if (!fqdn) return [];
  const r = parseDomains(fqdn);
  return "entries" in r ? [...new Set(r.entries.map((e) => e.host))] : [];
};

/**
 * The first of `wanted` that another resource of the team claims now (an application's or a
 * service application's domains, overlaps included), with the claim it overlaps; `self` is the
 * resource the document restores (its own claims do not count). With no caller to weigh the
 * finer rules of domain-ownership.ts, any overlap with another claim counts.
 */
export async function hostClaimedElsewhere(tx: Tx, teamId: number, wanted: string[], self: { applicationId: number } | { serviceId: number }): Promise<{ host: string; claim: string } | null> {
  if (!wanted.length) return null;
  const apps = await tx.application.findMany({ where: { teamId, fqdn: { not: null }, ...("applicationId" in self ? { id: { not: self.applicationId } } : {}) }, select: { fqdn: true } });
  const components = await tx.serviceComponent.findMany({
    where: { service: { teamId, ...("serviceId" in self ? { id: { not: self.serviceId } } : {}) }, fqdn: { not: null } },
    select: { fqdn: true },
  });
  const claimed = [...apps, ...components].flatMap((c) => hostsOf(c.fqdn));
  for (const host of wanted) {
    const claim = claimed.find((c) => hostsOverlap(c, host));
    if (claim) return { host, claim };
  }
  return null;
}

/** A restore's reason for a taken domain (null: none taken); `whose` names what to change ("the application's"). */
export const domainTakenReason = (taken: { host: string; claim: string } | null, whose: string): string | null =>
  taken && `the configuration's domain ${taken.host} is used by another resource now${taken.claim === taken.host ? "" : ` (overlapping ${taken.claim})`}; free it or change ${whose} domains first`;

/** Whether the caller may add bind mounts (bind-mounts.ts), decided when a restore is asked for: its outcome has no caller. */
export async function mayAddBindMounts(db: Db, scope: TeamScope): Promise<boolean> {
  try {
    await assertMayAddBindMounts(db, scope, ["/"]);
    return true;
  } catch (err) {
    if (err instanceof Forbidden) return false;
    throw err;
  }
}

/**
 * What a resource.restore's end means when it hands back a configuration document
 * (configuration and full backups): the document is checked, then applied to the resource in the
 * transaction that records the restore's success, so a handler that runs twice applies it once.
 * A document that cannot be applied leaves the resource as it was and fails the restore with the
 * reason. Other ends (volume restores, failures) are the plain restore fields.
 */
export class ConfigurationRestores {
  constructor(
    private readonly lookups: BackupLookups,
    private readonly configurations: ResourceConfigurations,
  ) {}

  private get db(): Db {
    return this.lookups.db;
  }

  /** true: the job's end was handled here; false: it is not a configuration restore's success (the caller applies it). */
  async restoreEnded(job: Pick<JobRow, "id" | "status" | "result" | "error" | "payload"> & { finishedAt?: Date | null }): Promise<boolean> {
    if (job.status !== "succeeded") return false;
    const result = ResourceRestoreResult.safeParse(safeJson(job.result));
    if (!result.success || result.data.configuration === null) return false;
    const execution = await this.db.backupExecution.findFirst({
      where: { restoreJobId: job.id, restoreStatus: { in: OPEN } },
      select: { id: true, schedule: { select: { applicationId: true, serviceId: true, databaseId: true, backupType: true } } },
    });
    if (!execution) return true;
    const finishedAt = job.finishedAt ?? new Date();
    const backupType = execution.schedule.backupType === "full" ? "full" : "configuration";
    const fail = async (reason: string) => {
      const prefix = backupType === "full" ? "the volumes were restored, but the configuration was not: " : "";
      await this.db.backupExecution.updateMany({ where: { id: execution.id, restoreJobId: job.id, restoreStatus: { in: OPEN } }, data: { restoreStatus: "failed", restoreReason: `${prefix}${reason}`, restoredAt: null } });
    };
    const source = sourceOf(execution.schedule);
    if (source === null) {
      await fail("the resource was deleted");
      return true;
    }
    const applier = this.configurations.of(source.kind);
    if (!applier) {
      await fail(`a ${source.kind}'s configuration is not restored by this instance`);
      return true;
    }
    let plan: unknown;
    try {
      plan = await applier.plan(source.id, result.data.configuration, { ...this.rights(job.payload), backupType });
    } catch (err) {
      if (!(err instanceof ConfigurationRefused)) this.lookups.log.error({ err: { message: (err as Error).message }, job: job.id }, "applying a restored configuration failed");
      await fail(err instanceof ConfigurationRefused ? err.message : "the configuration could not be applied (internal error)");
      return true;
    }
    // Nothing in the transaction throws on purpose (on SQLite a rollback would undo other requests' writes on the shared connection): a refusal is a returned reason.
    const outcome = await this.db.$transaction(async (tx): Promise<{ refused: string } | { applied: false } | { applied: true; wrote: unknown }> => {
      const refused = await applier.check(tx, plan);
      if (refused) return { refused };
      const claimed = await tx.backupExecution.updateMany({
        where: { id: execution.id, restoreJobId: job.id, restoreStatus: { in: OPEN } },
        data: { restoreStatus: "success", restoreReason: null, restoredAt: finishedAt },
      });
      if (claimed.count === 0) return { applied: false };
      return { applied: true, wrote: await applier.write(tx, plan) };
    });
    if ("refused" in outcome) await fail(outcome.refused);
    else if (outcome.applied) await applier.applied(plan, outcome.wrote);
    return true;
  }

  /** The rights the restore's caller had (its payload, sealed at rest): none when unreadable. */
  private rights(stored: string): { mayAddBindMounts: boolean } {
    try {
      const p = ResourceRestorePayload.safeParse(openPayload(this.lookups.deps.box, stored));
      return { mayAddBindMounts: p.success ? (p.data.apply?.may_add_bind_mounts ?? false) : false };
    } catch {
      return { mayAddBindMounts: false };
    }
  }
}
