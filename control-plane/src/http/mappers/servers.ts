import type { ConnectivityPeriod, Server, ServerDetail, ServerDomain, ServerListItem, ServerResource } from "@capstan/shared";
import type { Out } from "./types.js";
import {
  ConnectivityState,
  ServerStatus,
} from "@capstan/shared";
import { iso } from "../dto.js";
import { ServerService, type ConnectivityView, type ServerProxyView, type ServerWithDetail } from "../../services/servers.js";
import type { ServerDomainView, ServerResourceView } from "../../services/server-resources.js";

export type ServerRecord = {
  uuid: string;
  name: string;
  description: string;
  ip: string;
  port: number;
  user: string;
  isBuildServer: boolean;
  status: string;
  isUsable: boolean;
  facts: string | null;
  createdAt: Date;
};

export const serverDto = (s: ServerRecord): Out<typeof Server> => {
  const { usable, reason } = ServerService.usability(s);
  return {
    uuid: s.uuid,
    name: s.name,
    description: s.description,
    ip: s.ip,
    port: s.port,
    user: s.user,
    is_build_server: s.isBuildServer,
    status: ServerStatus.parse(s.status),
    settings: { is_reachable: s.status === "reachable", is_usable: usable, unusable_reason: reason },
    created_at: iso(s.createdAt),
  };
};

const agentDto = (s: { status: string; agentVersion: string | null; lastSeenAt: Date | null }) => ({
  connected: ServerService.agentConnected(s),
  version: s.agentVersion,
  last_seen_at: s.lastSeenAt ? iso(s.lastSeenAt) : null,
});

/** An item of GET /servers: the server with its agent, engine version and resource count (beyond the spec, docs/decisions.md). */
export const serverListItemDto = (s: ServerRecord & { agentVersion: string | null; lastSeenAt: Date | null; resourceCount: number }): Out<typeof ServerListItem> => ({
  ...serverDto(s),
  agent: agentDto(s),
  engine_version: ServerService.facts(s)?.engine.version ?? null,
  resource_count: s.resourceCount,
});

export const proxyDto = (p: ServerProxyView) => ({
  kind: p.kind,
  name: p.name,
  image: p.image,
  version: p.version,
  status: p.status,
  routes: p.routes,
  ...(p.warnings ? { warnings: p.warnings } : {}),
  isolation: p.isolation,
  reported_at: p.reportedAt ? iso(p.reportedAt) : null,
});

export const serverDetailDto = ({ server: s, proxy }: { server: ServerWithDetail; proxy: ServerProxyView }): Out<typeof ServerDetail> => {
  const facts = ServerService.facts(s);
  return {
    ...serverDto(s),
    private_key_uuid: s.privateKey.uuid,
    engine: {
      version: facts?.engine.version ?? null,
      api_version: facts?.engine.api_version ?? null,
      compose_version: facts?.engine.compose_version ?? null,
      swarm: facts?.engine.swarm ?? null,
    },
    host: facts
      ? {
          hostname: facts.hostname,
          os: `${facts.os.distro} ${facts.os.release}`.trim(),
          arch: facts.os.arch,
          kernel: facts.os.kernel,
          cpu_cores: facts.cpu.cores,
          memory_total_bytes: facts.memory.total_bytes,
          disk_total_bytes: facts.disk.total_bytes,
          disk_free_bytes: facts.disk.free_bytes,
        }
      : null,
    agent: agentDto(s),
    proxy: proxyDto(proxy),
    destinations: s.destinations.map((d) => ({ uuid: d.uuid, name: d.name, network: d.networkName })),
    updated_at: iso(s.updatedAt),
  };
};

export const resourceDto = (r: ServerResourceView): Out<typeof ServerResource> => ({
  uuid: r.uuid,
  name: r.name,
  type: r.type,
  status: r.status,
  stale: r.stale,
  last_seen_at: r.lastSeenAt ? iso(r.lastSeenAt) : null,
  project_uuid: r.projectUuid,
  environment_name: r.environmentName,
});

export const domainDto = (d: ServerDomainView): Out<typeof ServerDomain> => ({
  domain: d.domain,
  resource_uuid: d.resourceUuid,
  resource_name: d.resourceName,
  resource_type: d.resourceType,
  routed: d.routed,
  stale: d.stale,
  last_seen_at: d.lastSeenAt ? iso(d.lastSeenAt) : null,
});

// ---- connectivity history (dashboard, issue 22) ----
/** A period of GET /servers/{uuid}/connectivity; the current one's duration runs to `now`. */
export const connectivityPeriodDto = (p: ConnectivityView, now: Date): Out<typeof ConnectivityPeriod> => ({
  state: ConnectivityState.parse(p.state),
  since: iso(p.since),
  until: p.until ? iso(p.until) : null,
  duration_seconds: Math.max(0, Math.floor(((p.until ?? now).getTime() - p.since.getTime()) / 1000)),
});
