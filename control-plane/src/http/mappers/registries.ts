import { Registry, RegistryDetail, RegistryType } from "@capstan/shared";
import type { RegistryDetailRecord, RegistryRecord, RegistryService } from "../../services/registries/index.js";
import { iso } from "../dto.js";
import type { Out } from "./types.js";

/**
 * A registry as responses show it: the sealed credentials are never mapped, only `username`
 * (a login name, or a cloud_a access key id masked when it was saved) and a cloud_a region.
 */
export const registryDto = (r: RegistryRecord, service: RegistryService): Out<typeof Registry> => ({
  id: r.id,
  name: r.name,
  type: RegistryType.parse(r.type),
  url: r.url,
  username: r.username,
  is_default: r.defaultSlot !== null,
  server_count: r._count.servers,
  last_synced_at: r.lastSyncedAt ? iso(r.lastSyncedAt) : null,
  cloud_region: service.region(r),
  created_at: iso(r.createdAt),
  updated_at: iso(r.updatedAt),
});

const SYNC_STATUS = RegistryDetail.shape.servers.element.shape.sync_status;

/** The detail: the registry and, per assigned server, the state of its login there. */
export const registryDetailDto = (r: RegistryDetailRecord, service: RegistryService): Out<typeof RegistryDetail> => ({
  ...registryDto(r, service),
  servers: r.servers.map((a) => ({
    id: a.server.id,
    uuid: a.server.uuid,
    name: a.server.name,
    sync_status: SYNC_STATUS.parse(a.status),
    synced_at: a.syncedAt ? iso(a.syncedAt) : null,
    error: a.error,
    fingerprint: a.fingerprint,
    drift: service.drift(r, a),
  })),
});
