import type { Network, ResourceNetwork } from "@capstan/shared";
import type { Out } from "./types.js";
import {
  NetworkScope,
  NetworkStatus,
} from "@capstan/shared";
import { iso } from "../dto.js";
import type { NetworkView, ResourceNetworkView } from "../../services/networks/index.js";
import { shownNetworkStatus } from "../../services/network-removal.js";

export const networkDto = (n: NetworkView): Out<typeof Network> => ({
  uuid: n.uuid,
  container_network_name: n.name,
  scope: NetworkScope.parse(n.scope),
  driver: n.driver,
  status: shownNetworkStatus(n),
  deleting: n.status === "deleted" && n.deleting,
  server_id: n.serverId,
  environment_id: n.scope === "environment" ? n.environmentId : null,
  container_engine_id: n.containerEngineId,
  is_proxy_network: n.isProxyNetwork,
  resource_count: n.resourceCount,
  encrypted: n.encrypted,
  reason: n.reason,
  created_at: iso(n.createdAt),
  updated_at: iso(n.updatedAt),
});

export const resourceNetworkDto = (n: ResourceNetworkView): Out<typeof ResourceNetwork> => ({
  uuid: n.uuid,
  container_network_name: n.name,
  role: n.role,
  scope: n.scope === null ? null : NetworkScope.parse(n.scope),
  status: n.status === null ? null : NetworkStatus.parse(n.status),
  attached_at: n.attachedAt ? iso(n.attachedAt) : null,
});
