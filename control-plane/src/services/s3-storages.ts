import { isIP } from "node:net";
import type { CreateS3StorageBody, S3Target, UpdateS3StorageBody } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { NotFound, Invalid, Conflict } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import { isRefusedAddress } from "@capstan/shared/net";
import type { SecretBox } from "../crypto/secret-box.js";

type Window = { skip?: number; take?: number };

/** The connection test of a storage: an S3 round trip (see @capstan/shared/s3 testS3). */
export type S3Tester = (target: S3Target, prefix: string) => Promise<{ ok: true } | { ok: false; error: string }>;

/** How long a connection test may take before it is reported as not answering. */
export const S3_TEST_TIMEOUT_MS = 20_000;
/** Longest reason a failed test reports: the server's own words are not echoed beyond it. */
const REASON_MAX = 200;

/** Backups whose object is in a storage (retention or a delete clears s3Key when it goes). */
const HOLDS_OBJECT = { s3Key: { not: null } } satisfies Prisma.BackupExecutionWhereInput;
const withCount = { _count: { select: { schedules: true, executions: { where: HOLDS_OBJECT } } } } satisfies Prisma.S3StorageInclude;
export type S3StorageRecord = Prisma.S3StorageGetPayload<{ include: typeof withCount }>;

/** What the backup service needs of a storage to send backups there (secrets opened). */
export interface S3Destination {
  id: number;
  target: S3Target;
  prefix: string;
  passphrase: string | null;
}

/** Connection fields: changing any of them makes the last test result meaningless. */
const CONNECTION_FIELDS = ["endpoint", "region", "bucket", "path_prefix", "path_style", "access_key", "secret_key"] as const;

/** One line, no control characters, short: what a remote server said is shown only this far. */
export function shortReason(text: string): string {
  const line = text.replace(/[\u0000-\u001f\u007f]+/g, " ").replace(/\s+/g, " ").trim();
  return line.length > REASON_MAX ? `${line.slice(0, REASON_MAX - 1)}…` : line || "unknown error";
}

/**
 * S3 storages of a team (/s3-storages): where database backups go. Access key, secret key and
 * the encryption passphrase are sealed with the instance key and only leave the control plane
 * inside sealed job payloads. Team-level like private keys and git apps: every member reads,
 * owners and admins change. The connection test must not become a way to probe what only the
 * control plane reaches: literal loopback/link-local/metadata addresses are refused when the
 * storage is saved, and every address a name resolves to is checked again when connecting
 * (testS3 with allow_private from PLATFORM_ALLOW_PRIVATE_ENDPOINTS).
 */
export class S3StorageService {
  constructor(
    private readonly db: Db,
    /** Opens the sealed columns (routes mask the access key with it). */
    readonly box: SecretBox,
    private readonly opts: { allowPrivate: boolean; dialect: "sqlite" | "postgresql"; tester?: S3Tester; testTimeoutMs?: number },
  ) {}

  count(scope: TeamScope) {
    return this.db.s3Storage.count({ where: scope.inTeam });
  }

  list(scope: TeamScope, window: Window): Promise<S3StorageRecord[]> {
    return this.db.s3Storage.findMany({ where: scope.inTeam, orderBy: { id: "asc" }, include: withCount, ...window });
  }

  get(scope: TeamScope, id: number): Promise<S3StorageRecord> {
    return scope.s3Storage(id, withCount);
  }

  /**
   * Refuses endpoints that name, literally, an address S3 connections are refused at connect time
   * anyway (loopback, link-local, metadata: the rule of @capstan/shared/s3 and of git endpoints),
   * so a storage that can never work is not saved. Private networks are fine: self-hosted S3
   * servers live there.
   */
  private checkEndpoint(endpoint: string): void {
    if (this.opts.allowPrivate) return;
    // A trailing dot names the same host ("localhost." is localhost).
    const host = new URL(endpoint).hostname.replace(/^\[|\]$/g, "").replace(/\.+$/, "").toLowerCase();
    const literal = isIP(host) !== 0;
    if ((literal && isRefusedAddress(host)) || host === "localhost" || host.endsWith(".localhost")) {
      throw new Invalid({
        endpoint: [`${host} is a loopback, link-local or metadata address; refused (the instance setting PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows it).`],
      });
    }
  }

  async create(scope: TeamScope, input: CreateS3StorageBody): Promise<S3StorageRecord> {
    scope.requireTeamAdmin("manage S3 storages");
    this.checkEndpoint(input.endpoint);
    return this.db.s3Storage.create({
      data: {
        uuid: newUuid(),
        teamId: scope.teamId,
        name: input.name,
        description: input.description,
        endpoint: input.endpoint,
        region: input.region,
        bucket: input.bucket,
        pathPrefix: input.path_prefix,
        pathStyle: input.path_style,
        accessKey: this.box.seal(input.access_key),
        secretKey: this.box.seal(input.secret_key),
        encryptionPassphrase: input.encryption_passphrase === undefined ? null : this.box.seal(input.encryption_passphrase),
      },
      include: withCount,
    });
  }

  async update(scope: TeamScope, id: number, input: UpdateS3StorageBody): Promise<S3StorageRecord> {
    scope.requireTeamAdmin("manage S3 storages");
    const s = await this.get(scope, id);
    if (input.endpoint !== undefined) this.checkEndpoint(input.endpoint);
    const data: Prisma.S3StorageUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.description !== undefined) data.description = input.description;
    if (input.endpoint !== undefined) data.endpoint = input.endpoint;
    if (input.region !== undefined) data.region = input.region;
    if (input.bucket !== undefined) data.bucket = input.bucket;
    if (input.path_prefix !== undefined) data.pathPrefix = input.path_prefix;
    if (input.path_style !== undefined) data.pathStyle = input.path_style;
    if (input.access_key !== undefined) data.accessKey = this.box.seal(input.access_key);
    if (input.secret_key !== undefined) data.secretKey = this.box.seal(input.secret_key);
    if (input.encryption_passphrase !== undefined) {
      data.encryptionPassphrase = input.encryption_passphrase === null ? null : this.box.seal(input.encryption_passphrase);
    }
    if (CONNECTION_FIELDS.some((f) => input[f] !== undefined)) {
      data.isUsable = false;
      data.lastTestedAt = null;
    }
    return this.db.s3Storage.update({ where: { id: s.id }, data, include: withCount });
  }

  /**
   * Refused while anything still needs the storage: schedules sending backups there, backups
   * whose object is in it (restoring or deleting them needs its keys) and runs uploading to it.
   * Executions of deleted schedules went with them; their objects stay in the bucket.
   */
  async remove(scope: TeamScope, id: number): Promise<void> {
    scope.requireTeamAdmin("manage S3 storages");
    const s = await this.get(scope, id);
    // Nothing in the transaction throws on a refusal: on SQLite a rollback would also undo what
    // other requests wrote meanwhile on the shared connection.
    const outcome = await this.db.$transaction(async (tx) => {
      // PostgreSQL: a run claimed or a schedule moved here concurrently references the row (its
      // foreign key check locks it), so with the row locked first the counts below see it.
      // SQLite runs one transaction at a time.
      if (this.opts.dialect === "postgresql") await tx.$executeRawUnsafe(`SELECT 1 FROM "S3Storage" WHERE "id" = $1 FOR UPDATE`, s.id);
      const schedules = await tx.backupSchedule.count({ where: { s3StorageId: s.id } });
      const objects = await tx.backupExecution.count({ where: { s3StorageId: s.id, ...HOLDS_OBJECT } });
      const uploading = await tx.backupExecution.count({ where: { s3StorageId: s.id, status: { in: ["queued", "running"] } } });
      const refusal = inUseMessage(schedules, objects, uploading);
      if (refusal) return { refusal, deleted: 0 };
      return { refusal: null, deleted: (await tx.s3Storage.deleteMany({ where: { id: s.id } })).count };
    });
    if (outcome.refusal) throw new Conflict(outcome.refusal);
    if (outcome.deleted === 0) throw new NotFound("S3 storage");
  }

  /** The storage as the agent (and the test) uses it: secrets opened, allow_private from the instance. */
  destination(s: { id: number; endpoint: string; region: string; bucket: string; pathPrefix: string; pathStyle: boolean; accessKey: string; secretKey: string; encryptionPassphrase: string | null }): S3Destination {
    return {
      id: s.id,
      target: {
        endpoint: s.endpoint,
        region: s.region,
        bucket: s.bucket,
        path_style: s.pathStyle,
        access_key: this.box.open(s.accessKey),
        secret_key: this.box.open(s.secretKey),
        allow_private: this.opts.allowPrivate,
      },
      prefix: s.pathPrefix,
      passphrase: s.encryptionPassphrase === null ? null : this.box.open(s.encryptionPassphrase),
    };
  }

  /** Loads a storage by id (no team check: callers got the id from a row of the team). */
  async destinationById(id: number): Promise<S3Destination | null> {
    const s = await this.db.s3Storage.findUnique({ where: { id } });
    return s ? this.destination(s) : null;
  }

  /**
   * Connection test: HeadBucket, then writing and deleting a small object under the prefix.
   * Always answers (never an HTTP error for a failed test) and records is_usable. Owners and
   * admins only: it makes outbound connections with the team's credentials.
   */
  async test(scope: TeamScope, id: number): Promise<{ usable: boolean; error?: string }> {
    scope.requireTeamAdmin("test S3 storages");
    const s = await this.get(scope, id);
    const outcome = await this.runTest(this.destination(s));
    // Only when the settings tested are still the stored ones (a PATCH in between wins).
    await this.db.s3Storage.updateMany({
      where: { id: s.id, updatedAt: s.updatedAt },
      data: { isUsable: outcome.usable, lastTestedAt: new Date() },
    });
    return outcome;
  }

  private async runTest(d: S3Destination): Promise<{ usable: boolean; error?: string }> {
    const timeoutMs = this.opts.testTimeoutMs ?? S3_TEST_TIMEOUT_MS;
    const tester = this.opts.tester ?? defaultTester;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<{ ok: false; error: string }>((resolve) => {
      timer = setTimeout(() => resolve({ ok: false, error: `${d.target.endpoint} did not answer within ${Math.round(timeoutMs / 1000)} s` }), timeoutMs);
      timer.unref();
    });
    try {
      const r = await Promise.race([
        tester(d.target, d.prefix).catch((err: unknown) => ({ ok: false as const, error: (err as Error)?.message ?? String(err) })),
        timeout,
      ]);
      return r.ok ? { usable: true } : { usable: false, error: shortReason(r.error) };
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Why a storage cannot be deleted yet, and what to do about each reason; null when nothing needs it. */
function inUseMessage(schedules: number, objects: number, uploading: number): string | null {
  const reasons: string[] = [];
  if (schedules > 0) reasons.push(`${schedules} backup schedule(s) send backups to it (move them to another storage or delete them)`);
  if (objects > 0) {
    reasons.push(
      `${objects} backup(s) have their object in it (executions showing this s3_storage_id; deleting an execution removes its object too)`,
    );
  }
  if (uploading > 0) reasons.push(`${uploading} backup run(s) are uploading to it (wait until they end)`);
  return reasons.length ? `This S3 storage is still needed: ${reasons.join("; ")}. Nothing was deleted.` : null;
}

/** Loaded on first use: the AWS SDK stays out of start-up for instances that never test. */
const defaultTester: S3Tester = async (target, prefix) => {
  const { testS3 } = await import("@capstan/shared/s3");
  return testS3(target, prefix);
};

/** Masks an access key for responses: the last 4 characters of keys long enough to keep the rest hidden. */
export function maskAccessKey(sealedOrPlain: string, box: SecretBox): string {
  let key: string;
  try {
    key = box.open(sealedOrPlain);
  } catch {
    return "****";
  }
  return key.length >= 12 ? `****${key.slice(-4)}` : "****";
}
