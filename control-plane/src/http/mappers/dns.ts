import type { DnsDrift, DnsProvider, ManagedDomain } from "@capstan/shared";
import type { AppliedRecords, DnsDomainRecord, DnsProviderRecord, DnsService } from "../../services/dns/index.js";
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
