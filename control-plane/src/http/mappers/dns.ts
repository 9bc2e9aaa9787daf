import type { DnsDrift, DnsProvider, ManagedDomain, DomainSyncResult } from "@capstan/shared";
import type { DnsDomainRecord, DnsProviderRecord, DnsService, SyncOutcome } from "../../services/dns/index.js";
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
  created_at: iso(d.createdAt),
  updated_at: iso(d.updatedAt),
});

const rec = (r: { name: string; type: string; content: string }) => ({ name: r.name, type: r.type, content: r.content });

export const syncResultDto = (o: SyncOutcome): DomainSyncResult => ({
  message:
    o.status === "error"
      ? "The DNS provider failed; nothing more was changed."
      : o.status === "drifted"
        ? "Synced; records Capstan did not create are in the way and were left as they are (see drift)."
        : "Synced.",
  sync_status: o.status,
  applied: { created: o.plan.creates.map(rec), updated: o.plan.updates.map((u) => rec(u.record)), deleted: o.plan.deletes.map(rec) },
  drift: o.plan.drift,
  ...(o.error ? { error: o.error } : {}),
});
