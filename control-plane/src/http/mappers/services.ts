import type { LabelOverrides, Service, ServiceDetail, ServiceEnvVar, ServiceStorage } from "@capstan/shared";
import type { Out } from "./types.js";
import { iso } from "../dto.js";
import type { LabelOverridesView, ServiceApplicationView, ServiceListItem, ServiceWithDetail } from "../../services/services/index.js";
import type { EnvView } from "../../services/env-vars.js";

export const serviceListDto = (s: ServiceListItem): Out<typeof Service> => ({
  uuid: s.uuid,
  name: s.name,
  status: s.status,
  type: s.type,
  created_at: s.createdAt,
  project_uuid: s.projectUuid,
  environment_name: s.environmentName,
  server_uuid: s.serverUuid,
});

export const serviceEnvDto = (e: EnvView): Out<typeof ServiceEnvVar> => ({
  uuid: e.uuid,
  key: e.key,
  value: e.value,
  is_generated: e.isGenerated,
  created_at: iso(e.createdAt),
  updated_at: iso(e.updatedAt),
});

/** The detail; variable values follow the one secret-display rule (reveal: TeamScope.maySeeSecrets). */
export function serviceDetailDto(d: { service: ServiceWithDetail; reveal: boolean }, open: (sealed: string) => string): Out<typeof ServiceDetail> {
  const { service: s, reveal } = d;
  const component = (c: ServiceWithDetail["components"][number]) => ({ uuid: c.uuid, name: c.name, image: c.image, status: c.status, exclude_from_status: c.excludeFromStatus });
  return {
    ...serviceListDto({
      uuid: s.uuid,
      name: s.name,
      status: s.status,
      type: s.type,
      createdAt: iso(s.createdAt),
      projectUuid: s.environment.project.uuid,
      environmentName: s.environment.name,
      serverUuid: s.server.uuid,
    }),
    id: s.id,
    description: s.description,
    template_source: s.templateSource,
    project_name: s.environment.project.name,
    environment_uuid: s.environment.uuid,
    destination_uuid: s.destination.uuid,
    docker_compose_raw: s.composeRaw,
    applications: s.components.filter((c) => c.kind === "application").map((c) => ({ ...component(c), fqdn: c.fqdn })),
    databases: s.components.filter((c) => c.kind === "database").map(component),
    envs: s.envs.map((e) =>
      serviceEnvDto({ uuid: e.uuid, key: e.key, value: reveal ? open(e.value) : null, isBuildTime: e.isBuildTime, isPreview: e.isPreview, isGenerated: e.isGenerated, createdAt: e.createdAt, updatedAt: e.updatedAt }),
    ),
    updated_at: iso(s.updatedAt),
  };
}

/** A storage with the compose service it is mounted into; volume_name is the Docker volume on the server. */
export const serviceStorageDto = (
  serviceUuid: string,
  v: { uuid: string; name: string; mountPath: string; hostPath: string | null; createdAt: Date; component: { name: string } },
): Out<typeof ServiceStorage> => ({
  uuid: v.uuid,
  name: v.name,
  service_name: v.component.name,
  mount_path: v.mountPath,
  host_path: v.hostPath,
  type: v.hostPath ? ("bind" as const) : ("volume" as const),
  volume_name: v.hostPath ? null : `${serviceUuid}-${v.name}`,
  created_at: iso(v.createdAt),
});

/** A service application's or database's label overrides (GET, and the data of PUT and DELETE). */
export const labelOverridesDto = (v: LabelOverridesView): Out<typeof LabelOverrides> => ({
  uuid: v.uuid,
  service_uuid: v.serviceUuid,
  name: v.name,
  yaml: v.yaml,
  labels: v.labels,
  dropped: v.dropped,
});

// ---- w7/svcroute: a service application's domains (issue 17) ----

/** A service application after PATCH /service-applications/{uuid}. */
export const serviceApplicationDto = (v: ServiceApplicationView) => ({
  uuid: v.uuid,
  name: v.name,
  image: v.image,
  status: v.status,
  exclude_from_status: v.excludeFromStatus,
  fqdn: v.fqdn,
  service_uuid: v.serviceUuid,
});
