import { randomBytes } from "node:crypto";
import { JOBS, type DbCredentials, type JobEnvelope } from "@capstan/shared";
import type { TestInstance } from "../harness.js";
import type { KeyFactory } from "./ssh.js";
import type { S3Server } from "../../support/s3-server.js";
import { appWorld, connectServerAgent, ok, placement, type AppWorld } from "./applications.js";
import type { ScriptedAgent } from "./fake-agent.js";

export interface BackupWorld extends AppWorld {
  agent: ScriptedAgent;
  database: { id: number; uuid: string; name: string };
  credentials: DbCredentials;
  /** An S3 storage of the team on the test's S3 server, with an encryption passphrase. */
  storage: { id: number; passphrase: string };
}

/**
 * A standalone PostgreSQL database in the world's production environment, created through the
 * API without its first deployment (no engine runs behind it: the scripted agent answers jobs).
 */
export async function createDatabase(w: AppWorld, name = "orders"): Promise<{ uuid: string; name: string; credentials: DbCredentials }> {
  const credentials: DbCredentials = { user: "app", password: `pw-${randomBytes(12).toString("hex")}`, database: "orders", root_password: null };
  const created = await ok(
    w.api.post("/databases/postgresql", {
      ...placement(w),
      name,
      instant_deploy: false,
      postgres_user: credentials.user,
      postgres_password: credentials.password,
      postgres_db: credentials.database,
    }),
    "database",
  );
  return { uuid: created.uuid, name: created.name, credentials };
}

/** A team's world with its server's scripted agent (none with `agent: false`) and an S3 storage with an encryption passphrase on the test's S3 server. */
export interface StorageWorld extends AppWorld {
  agent: ScriptedAgent | null;
  storage: { id: number; passphrase: string };
}

export async function storageWorld(t: TestInstance, keys: KeyFactory, s3: S3Server, opts: { agent?: boolean; agents?: ScriptedAgent[] } = {}): Promise<StorageWorld> {
  const w = await appWorld(t, keys);
  const agent = opts.agent === false ? null : await connectServerAgent(t, w);
  if (agent) opts.agents?.push(agent);
  // A redelivered prepare job (its first outcome raced the delivery pump) must not reach the tests' nextJob().
  agent?.serve("server.prepare", () => ({ ok: true, result: { created: [], existing: ["capstan"] } }));
  const passphrase = `backup-pass-${randomBytes(8).toString("hex")}`;
  const storage = await ok(
    w.api.post("/s3-storages", {
      name: "backups",
      endpoint: s3.endpoint,
      bucket: s3.bucket,
      path_prefix: "capstan/prod",
      access_key: s3.accessKey,
      secret_key: s3.secretKey,
      encryption_passphrase: passphrase,
    }),
    "s3 storage",
  );
  return { ...w, agent, storage: { id: storage.data.id, passphrase } };
}

/** A team with a server whose scripted agent is connected, a database on it and an S3 storage. */
export async function backupWorld(t: TestInstance, keys: KeyFactory, s3: S3Server, opts: { agent?: boolean } = {}): Promise<BackupWorld> {
  const w = await storageWorld(t, keys, s3, opts);
  const database = await createDatabase(w);
  const row = await t.instance.database.prisma.standaloneDatabase.findUniqueOrThrow({ where: { uuid: database.uuid } });
  return { ...w, agent: w.agent as ScriptedAgent, database: { id: row.id, uuid: database.uuid, name: database.name }, credentials: database.credentials };
}

/** A successful resource.backup result for a job, as the real agent reports it (test/api/resource-backup*.test.ts). */
export function resourceBackupResult(job: JobEnvelope, extra: Record<string, unknown> = {}) {
  const p = JOBS["resource.backup"].payload.parse(job.payload);
  return {
    filename: p.filename,
    size: 987_654,
    is_encrypted: p.passphrase !== null,
    local_path: `/var/lib/capstan-agent/backups/${p.resource.uuid}/${p.schedule_uuid}/${p.filename}`,
    s3_key: p.s3 ? `${p.s3.prefix}${p.filename}` : null,
    removed_local: [],
    removed_remote: [],
    ...extra,
  };
}
