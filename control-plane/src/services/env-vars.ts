import { MAX_ENVS } from "@capstan/shared";
import type { Database, Db, Prisma } from "../db/client.js";
import { lockInTransaction } from "../db/locks.js";
import type { Need, TeamScope } from "../domain/scope.js";
import { NotFound, Invalid, Conflict } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import { isUniqueViolation } from "../db/errors.js";
import type { SecretBox } from "../crypto/secret-box.js";

/** The resource a variable belongs to: its owner column (EnvVar.applicationId or EnvVar.databaseId). */
export type EnvOwner = { applicationId: number } | { databaseId: number } | { serviceId: number };

/** An owner found for the caller (inside its team, access checked for the need). */
export interface EnvOwnerRef {
  owner: EnvOwner;
  /** "An application", "A database": for limit messages. */
  noun: string;
  /** Whether the caller may see values (TeamScope.maySeeSecrets: read scope, full access on the owner's environment). */
  canReveal(): Promise<boolean>;
}

/** Finds the owner by its uuid for the caller with the need, or throws its 404/403. */
export type EnvOwnerResolver = (scope: TeamScope, uuid: string, need: Need) => Promise<EnvOwnerRef>;

/** A variable as the API shows it: value null unless the caller may see values here. */
export interface EnvView {
  uuid: string;
  key: string;
  value: string | null;
  isBuildTime: boolean;
  isPreview: boolean;
  /** A service template's generated secret, as created (services/services/): false once a user sets its value. */
  isGenerated: boolean;
  createdAt: Date;
  updatedAt: Date;
}

type EnvRow = { uuid: string; key: string; value: string; isBuildTime: boolean; isPreview: boolean; isGenerated: boolean; createdAt: Date; updatedAt: Date };

const label = (key: string, isPreview: boolean) => (isPreview ? `${key} (preview)` : key);

/**
 * Environment variables of one kind of resource (applications, databases: one service each,
 * told apart by their owner resolver). Values are sealed with the instance key. Every answer of
 * the .../envs routes (list, create, patch, bulk) follows one rule: the value for callers who may
 * read the owner's secrets (canReveal), null for everyone else. The resources' detail views mask
 * them always (masked()).
 */
export class EnvVarService {
  constructor(
    private readonly db: Db,
    private readonly resolve: EnvOwnerResolver,
    private readonly box: SecretBox,
    private readonly dialect: Database["kind"],
  ) {}

  /**
   * Holds the owner's variables until the transaction ends: the MAX_ENVS count, the lookup by
   * key and the create it leads to are one step, so concurrent requests for one key both
   * succeed (the second updates what the first created) instead of one failing on the unique
   * index. SQLite runs one transaction at a time already (db/locks.ts).
   */
  private lockOwner(tx: Prisma.TransactionClient, owner: EnvOwner): Promise<void> {
    if ("applicationId" in owner) return lockInTransaction(tx, this.dialect, "applicationEnvs", owner.applicationId);
    if ("databaseId" in owner) return lockInTransaction(tx, this.dialect, "databaseEnvs", owner.databaseId);
    return lockInTransaction(tx, this.dialect, "serviceEnvs", owner.serviceId);
  }

  private view(row: EnvRow, reveal: boolean): EnvView {
    return {
      uuid: row.uuid,
      key: row.key,
      value: reveal ? this.box.open(row.value) : null,
      isBuildTime: row.isBuildTime,
      isPreview: row.isPreview,
      isGenerated: row.isGenerated,
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
    };
  }

  /** Masked views, for responses other than the variable list. */
  masked(rows: EnvRow[]): EnvView[] {
    return rows.map((r) => this.view(r, false));
  }

  async list(scope: TeamScope, ownerUuid: string): Promise<EnvView[]> {
    const ref = await this.resolve(scope, ownerUuid, "view");
    const reveal = await ref.canReveal();
    const rows = await this.db.envVar.findMany({ where: ref.owner, orderBy: { id: "asc" } });
    return rows.map((r) => this.view(r, reveal));
  }

  async create(scope: TeamScope, ownerUuid: string, input: { key: string; value: string; is_build_time?: boolean; is_preview?: boolean }): Promise<EnvView> {
    const ref = await this.resolve(scope, ownerUuid, "manage");
    const isPreview = input.is_preview ?? false;
    try {
      const row = await this.db.$transaction(async (tx) => {
        await this.lockOwner(tx, ref.owner);
        const count = await tx.envVar.count({ where: ref.owner });
        if (count >= MAX_ENVS) throw new Invalid({ key: [`${ref.noun} has at most ${MAX_ENVS} variables.`] });
        return tx.envVar.create({
          data: {
            uuid: newUuid(),
            ...ref.owner,
            key: input.key,
            value: this.box.seal(input.value),
            isBuildTime: input.is_build_time ?? false,
            isPreview,
          },
        });
      });
      return this.view(row, await ref.canReveal());
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict(`Variable ${label(input.key, isPreview)} already exists; change it with PATCH .../envs${"databaseId" in ref.owner ? "/bulk" : ""}.`);
      throw err;
    }
  }

  /** PATCH .../envs: the variable of that key (preview or not) gets a new value and/or build-time flag. */
  async update(scope: TeamScope, ownerUuid: string, input: { key: string; value?: string | undefined; is_build_time?: boolean | undefined; is_preview: boolean }): Promise<EnvView> {
    const ref = await this.resolve(scope, ownerUuid, "manage");
    const row = await this.db.envVar.findFirst({ where: { ...ref.owner, key: input.key, isPreview: input.is_preview } });
    if (!row) throw new NotFound(`Variable ${label(input.key, input.is_preview)}`);
    const updated = await this.db.envVar.update({
      where: { id: row.id },
      data: {
        ...(input.value !== undefined ? { value: this.box.seal(input.value), isGenerated: false } : {}),
        ...(input.is_build_time !== undefined ? { isBuildTime: input.is_build_time } : {}),
      },
    });
    return this.view(updated, await ref.canReveal());
  }

  /**
   * PATCH .../envs/bulk: creates or updates every listed variable in one transaction; the
   * request is validated as a whole first, so it applies completely or not at all. Concurrent
   * requests for one owner take turns (lockOwner), so identical ones both succeed.
   */
  async bulk(
    scope: TeamScope,
    ownerUuid: string,
    variables: { key: string; value: string; is_build_time?: boolean | undefined; is_preview?: boolean | undefined }[],
  ): Promise<EnvView[]> {
    const ref = await this.resolve(scope, ownerUuid, "manage");
    const rows = await this.db.$transaction(async (tx) => {
      await this.lockOwner(tx, ref.owner);
      const existing = await tx.envVar.findMany({ where: ref.owner });
      const byKey = new Map(existing.map((e) => [`${e.key}\u0000${e.isPreview}`, e]));
      const added = variables.filter((v) => !byKey.has(`${v.key}\u0000${v.is_preview ?? false}`)).length;
      if (existing.length + added > MAX_ENVS) throw new Invalid({ variables: [`${ref.noun} has at most ${MAX_ENVS} variables; this would make ${existing.length + added}.`] });
      const out: EnvRow[] = [];
      for (const v of variables) {
        const current = byKey.get(`${v.key}\u0000${v.is_preview ?? false}`);
        if (current) {
          out.push(
            await tx.envVar.update({
              where: { id: current.id },
              data: { value: this.box.seal(v.value), isGenerated: false, ...(v.is_build_time !== undefined ? { isBuildTime: v.is_build_time } : {}) },
            }),
          );
        } else {
          out.push(
            await tx.envVar.create({
              data: {
                uuid: newUuid(),
                ...ref.owner,
                key: v.key,
                value: this.box.seal(v.value),
                isBuildTime: v.is_build_time ?? false,
                isPreview: v.is_preview ?? false,
              },
            }),
          );
        }
      }
      return out;
    });
    const reveal = await ref.canReveal();
    return rows.map((r) => this.view(r, reveal));
  }

  async remove(scope: TeamScope, ownerUuid: string, envUuid: string): Promise<void> {
    const ref = await this.resolve(scope, ownerUuid, "manage");
    const row = await this.db.envVar.findFirst({ where: { uuid: envUuid, ...ref.owner }, select: { id: true } });
    if (!row) throw new NotFound("Environment variable");
    await this.db.envVar.delete({ where: { id: row.id } });
  }
}

/** The owners of application variables (routes/applications.ts); values are shown to callers who may read the application's secrets. */
export function applicationEnvOwners(): EnvOwnerResolver {
  return async (scope, uuid, need) => {
    const app = await scope.application(uuid, need);
    return { owner: { applicationId: app.id }, noun: "An application", canReveal: () => scope.maySeeSecrets(app.environment) };
  };
}
