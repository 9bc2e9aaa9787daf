import type { Database, DatabaseDetail, DatabaseEnvVar } from "@capstan/shared";
import type { Out } from "./types.js";
import { backupScheduleDto } from "./backups.js";
import {
  DATABASE_ENGINE_FACTS,
  DATABASE_ENGINE_PARAMS,
  MASKED_PASSWORD,
  databaseType,
  databaseUrl,
  DatabaseEngine,
  type DbCredentials,
} from "@capstan/shared";
import { iso } from "../dto.js";
import type { DatabaseListItem, DatabaseWithDetail } from "../../services/databases.js";
import type { EnvView } from "../../services/env-vars.js";
import type { Services } from "../../services/index.js";

export const databaseListDto = (d: DatabaseListItem): Out<typeof Database> => ({
  uuid: d.uuid,
  name: d.name,
  type: databaseType(d.engine),
  status: d.status,
  image: d.image,
  is_public: d.isPublic,
  public_port: d.publicPort,
  project_uuid: d.projectUuid,
  environment_name: d.environmentName,
  server_uuid: d.serverUuid,
  created_at: d.createdAt,
  last_error: d.lastError,
  last_error_at: d.lastErrorAt,
});

export const databaseEnvDto = (e: EnvView): Out<typeof DatabaseEnvVar> => ({ uuid: e.uuid, key: e.key, value: e.value, created_at: iso(e.createdAt), updated_at: iso(e.updatedAt) });

/** The engine's credential parameters by their create-path names; passwords null when masked. */
export function credentialsDto(engine: DatabaseEngine, c: DbCredentials, reveal: boolean): Record<string, string | null> {
  const p = DATABASE_ENGINE_PARAMS[engine];
  const out: Record<string, string | null> = {};
  if (p.user) out[p.user.param] = c.user;
  out[p.password] = reveal ? c.password : null;
  // A ClickHouse database stored before clickhouse_db existed has none: it runs on the default.
  if (p.database) out[p.database.param] = c.database ?? p.database.default;
  if (p.rootPassword) out[p.rootPassword] = reveal ? c.root_password : null;
  return out;
}

export async function databaseDetailDto(d: { row: DatabaseWithDetail; credentials: DbCredentials; reveal: boolean }, services: Services): Promise<Out<typeof DatabaseDetail>> {
  const { row, reveal } = d;
  const engine = DatabaseEngine.parse(row.engine);
  const shown = reveal ? d.credentials : { ...d.credentials, password: MASKED_PASSWORD };
  return {
    ...databaseListDto({
      uuid: row.uuid,
      name: row.name,
      engine,
      status: row.status,
      image: row.image,
      isPublic: row.isPublic,
      publicPort: row.publicPort,
      createdAt: iso(row.createdAt),
      projectUuid: row.environment.project.uuid,
      environmentName: row.environment.name,
      serverUuid: row.server.uuid,
      lastError: row.lastError,
      lastErrorAt: row.lastErrorAt ? iso(row.lastErrorAt) : null,
    }),
    id: row.id,
    engine,
    description: row.description,
    project_name: row.environment.project.name,
    environment_uuid: row.environment.uuid,
    destination_uuid: row.destination.uuid,
    limits_memory: row.limitsMemory,
    limits_cpus: row.limitsCpus,
    internal_db_url: databaseUrl(engine, shown, row.uuid, DATABASE_ENGINE_FACTS[engine].port),
    external_db_url: row.isPublic && row.publicPort !== null ? databaseUrl(engine, shown, row.server.ip, row.publicPort) : null,
    credentials: credentialsDto(engine, d.credentials, reveal),
    credentials_masked: !reveal,
    envs: row.envs.map((e) => databaseEnvDto({ ...e, value: null })),
    backup_schedules: (await services.backups.schedulesOfDatabase(row)).map(backupScheduleDto),
    updated_at: iso(row.updatedAt),
  };
}
