import type { Application, ApplicationDetail, EnvVar, Storage } from "@capstan/shared";
import type { Out } from "./types.js";
import { applicationDeploymentDto } from "./deployments.js";
import {
  parseDomains,
  BuildPack,
  ApplicationSource,
} from "@capstan/shared";
import { iso } from "../dto.js";
import type { ApplicationListItem, ApplicationWithDetail } from "../../services/applications.js";
import type { EnvView } from "../../services/env-vars.js";
import { dockerVolumeName } from "../../services/volumes.js";
import { applicationSettings } from "../../services/application-settings.js";
import type { Services } from "../../services/index.js";

export const applicationListDto = (a: ApplicationListItem): Out<typeof Application> => ({
  uuid: a.uuid,
  name: a.name,
  fqdn: a.fqdn,
  status: a.status,
  build_pack: BuildPack.parse(a.buildPack),
  git_repository: a.gitRepository,
  git_branch: a.gitBranch,
  project_uuid: a.projectUuid,
  environment_name: a.environmentName,
  server_uuid: a.serverUuid,
  created_at: a.createdAt,
});

export const envDto = (e: EnvView): Out<typeof EnvVar> => ({
  uuid: e.uuid,
  key: e.key,
  value: e.value,
  is_build_time: e.isBuildTime,
  is_preview: e.isPreview,
  created_at: iso(e.createdAt),
  updated_at: iso(e.updatedAt),
});

export type StorageRow = { uuid: string; name: string; mountPath: string; hostPath: string | null; createdAt: Date };
export const storageDto = (appUuid: string, v: StorageRow): Out<typeof Storage> => ({
  uuid: v.uuid,
  name: v.name,
  mount_path: v.mountPath,
  host_path: v.hostPath,
  type: v.hostPath ? ("bind" as const) : ("volume" as const),
  volume_name: v.hostPath ? null : dockerVolumeName(appUuid, v.name),
  created_at: iso(v.createdAt),
});

export function applicationDetailDto(a: ApplicationWithDetail, services: Services): Out<typeof ApplicationDetail> {
  const domains = a.fqdn ? parseDomains(a.fqdn) : { entries: [] };
  return {
    // resource backups (issue 19)
    id: a.id,
    ...applicationListDto({
      uuid: a.uuid,
      name: a.name,
      fqdn: a.fqdn,
      status: a.status,
      buildPack: a.buildPack,
      gitRepository: a.gitRepository,
      gitBranch: a.gitBranch,
      createdAt: iso(a.createdAt),
      projectUuid: a.environment.project.uuid,
      environmentName: a.environment.name,
      serverUuid: a.server.uuid,
    }),
    source: ApplicationSource.parse(a.source),
    project_name: a.environment.project.name,
    environment_uuid: a.environment.uuid,
    destination_uuid: a.destination.uuid,
    git_app_uuid: a.gitApp?.uuid ?? null,
    private_key_uuid: a.privateKey?.uuid ?? null,
    domains: "entries" in domains ? domains.entries : [],
    ...applicationSettings(a),
    envs: services.envVars.masked(a.envs).map(envDto),
    storages: a.volumes.map((v) => storageDto(a.uuid, v)),
    deployments: a.deployments.map(applicationDeploymentDto),
    webhooks: services.applications.webhookUrls(a.uuid),
    updated_at: iso(a.updatedAt),
  };
}
