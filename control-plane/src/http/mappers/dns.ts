import type { Out } from "./types.js";
import type { DnsDomainPlan, DnsDrift, DnsResourceType, DnsProvider, DnsResourceHostname, DnsResourceState, EnvironmentBinding, ManagedDomain } from "@capstan/shared";
import type { AppliedRecords, DnsDomainRecord, DnsProviderRecord, DnsService, DomainLite, HostnameState } from "../../services/dns/index.js";
import type { Plan } from "../../services/dns/reconcile.js";
import { iso } from "../dto.js";

/** DNS (issue 21). Credentials only masked (DnsService.maskedCredentials). */
export const dnsProviderDto = (p: DnsProviderRecord, dns: DnsService): DnsProvider => ({
  uuid: p.uuid,
  name: p.name,
  type: p.type as DnsProvider["type"],
  credentials: dns.maskedCredentials(p),
  is_usable: p.isUsable,
  last_tested_at: p.lastTestedAt ? iso(p.lastTestedAt) : null,
  last_test_error: p.lastTestError,
  domain_count: p._count.domains,
  created_at: iso(p.createdAt),
  updated_at: iso(p.updatedAt),
});

function drift(json: string): DnsDrift[] {
  try {
    return JSON.parse(json) as DnsDrift[];
  } catch {
    return [];
  }
}

export const domainDto = (d: DnsDomainRecord): ManagedDomain => ({
  uuid: d.uuid,
  name: d.name,
  zone: d.zone,
  dns_provider_uuid: d.provider.uuid,
  routing_mode: d.routingMode as ManagedDomain["routing_mode"],
  server_uuid: d.server?.uuid ?? null,
  sync_status: d.syncStatus as ManagedDomain["sync_status"],
  sync_error: d.syncError,
  drift: drift(d.drift),
  last_synced_at: d.lastSyncedAt ? iso(d.lastSyncedAt) : null,
  reconcile: { state: d.reconcileState as ManagedDomain["reconcile"]["state"], requested_at: d.reconcileRequestedAt ? iso(d.reconcileRequestedAt) : null },
  last_applied: applied(d.lastApplied),
  created_at: iso(d.createdAt),
  updated_at: iso(d.updatedAt),
});

function applied(json: string): AppliedRecords {
  try {
    const a = JSON.parse(json) as Partial<AppliedRecords>;
    return { created: a.created ?? [], updated: a.updated ?? [], deleted: a.deleted ?? [] };
  } catch {
    return { created: [], updated: [], deleted: [] };
  }
}

// ---- dns resources (issue 21, w6) ----

export const resourceStateDto = (type: DnsResourceType, uuid: string, hosts: HostnameState[]): Out<typeof DnsResourceState> => ({
  resource_type: type,
  resource_uuid: uuid,
  hostnames: hosts.map(
    (h): Out<typeof DnsResourceHostname> => ({
      hostname: h.hostname,
      component: h.component,
      state: h.state,
      domain_uuid: h.domain?.uuid ?? null,
      domain_name: h.domain?.name ?? null,
      binding: h.binding,
      record: h.record,
      error: h.error,
    }),
  ),
});

const planned = (r: { name: string; type: string; content: string }) => ({ name: r.name, type: r.type, content: r.content });

export const domainPlanDto = (p: { domain: DomainLite; plan: Plan; error: string | null }): Out<typeof DnsDomainPlan> => ({
  domain_uuid: p.domain.uuid,
  domain_name: p.domain.name,
  creates: p.plan.creates.map(planned),
  updates: p.plan.updates.map((u) => planned(u.record)),
  deletes: p.plan.deletes.map(planned),
  drift: p.plan.drift.map((d) => ({ name: d.name, type: d.type, content: d.content, reason: d.reason })),
  error: p.error,
});

export const environmentBindingDto = (
  domainUuid: string,
  b: { id: number; environmentId: number | null; environmentRole: string | null; priority: number; createdAt: Date },
): Out<typeof EnvironmentBinding> => ({
  id: b.id,
  domain_uuid: domainUuid,
  environment_id: b.environmentId,
  environment_role: b.environmentRole,
  priority: b.priority,
  created_at: iso(b.createdAt),
});
