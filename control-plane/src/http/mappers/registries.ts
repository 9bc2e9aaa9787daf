import { Registry, RegistryType } from "@capstan/shared";
import type { RegistryRecord, RegistryService } from "../../services/registries/index.js";
import { iso } from "../dto.js";
import type { Out } from "./types.js";

/**
 * A registry as responses show it: the sealed credentials are never mapped, only `username`
 * (a login name, or a cloud_a access key id masked when it was saved) and a cloud_a region.
 * Server assignment comes with a later increment of issue 18: no server yet (docs/registries.md).
 */
export const registryDto = (r: RegistryRecord, service: RegistryService): Out<typeof Registry> => ({
  id: r.id,
  name: r.name,
  type: RegistryType.parse(r.type),
  url: r.url,
  username: r.username,
  is_default: r.defaultSlot !== null,
  server_count: 0,
  last_synced_at: r.lastSyncedAt ? iso(r.lastSyncedAt) : null,
  cloud_region: service.region(r),
  created_at: iso(r.createdAt),
  updated_at: iso(r.updatedAt),
});
