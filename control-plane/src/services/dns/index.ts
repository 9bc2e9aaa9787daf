import { isIP } from "node:net";
import { parseDomains, type AssignDomainBody, type DnsResourceType, type EnvironmentBindingBody, type CreateDnsProviderBody, type CreateManagedDomainBody, type DnsProviderType, type RoutingMode } from "@capstan/shared";
import type { Db, Prisma } from "../../db/client.js";
import type { SecretBox } from "../../crypto/secret-box.js";
import type { TeamScope } from "../../domain/scope.js";
import { Conflict, Invalid, NotFound } from "../../domain/errors.js";
import { requireFeature } from "../../domain/features.js";
import { newUuid } from "../../lib/ids.js";
import type { OutboundFetch } from "../../lib/outbound.js";
import { shortReason } from "../s3-storages.js";
import { CloudflareTunnelProvider, createProvider, tunnelTarget, type DnsProvider, type ProviderConfig, type RecordData } from "./providers/index.js";
import { applyTunnel, planTunnel, withTunnelLock } from "./tunnel.js";
import { applyPlan, markerName, planZone, type Drift, type Plan } from "./reconcile.js";
import { bareName } from "./providers/types.js";
import { bindHost, covers, type BindingContext, type HostBinding } from "./bindings.js";
import { DNS_RECONCILER_DEFAULTS, DnsReconciler, type DnsReconcilerOptions, type ReconcileDispatch } from "./reconciler.js";

type Window = { skip?: number; take?: number };

const providerInclude = { _count: { select: { domains: true } } } satisfies Prisma.DnsProviderInclude;
export type DnsProviderRecord = Prisma.DnsProviderGetPayload<{ include: typeof providerInclude }>;
const domainInclude = { provider: { select: { uuid: true, type: true } }, server: { select: { uuid: true, ip: true } } } satisfies Prisma.DnsDomainInclude;
export type DnsDomainRecord = Prisma.DnsDomainGetPayload<{ include: typeof domainInclude }>;

/** How long a test or a sync may wait for the provider as a whole. */
export const DNS_CALL_TIMEOUT_MS = 60_000;
/** How long DELETE /domains/{uuid} waits for a running reconcile of the domain before its 409. */
export const DELETE_WAIT_MS = 5_000;
/** TTL of the records Capstan writes (and of their markers). */
export const RECORD_TTL = 300;

export interface DnsServiceOptions {
  allowPrivate: boolean;
  cloudflareApiUrl: string;
  /** fetch for user-chosen URLs (the private-address guard; lib/outbound.ts). */
  userFetch: OutboundFetch;
  /** fetch for the operator-set Cloudflare URL. */
  fetch: OutboundFetch;
  /** The durable reconcile job's timings (reconciler.ts). */
  reconciler?: DnsReconcilerOptions;
}

export interface SyncOutcome {
  status: "synced" | "drifted" | "error";
  plan: Plan;
  /** The routing records the reconcile wanted (w6: hostnames' sync state). */
  desired?: RecordData[];
  error?: string;
}

/**
 * DNS providers and managed domains of a team (spec 4.14, docs/dns.md). Team-level like S3
 * storages: every member reads, owners and admins change, test and sync. Every route is behind
 * DNS_PROVIDER_MANAGEMENT (route table); a team's second provider needs DNS_MULTI_DOMAIN.
 * Credentials are sealed as one JSON document and only opened to talk to the provider.
 */
export class DnsService {
  /** Runs the domains' reconciles as durable jobs (started and stopped with the instance). */
  readonly reconciler: DnsReconciler;

  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    private readonly opts: DnsServiceOptions,
  ) {
    this.reconciler = new DnsReconciler(db, (id) => this.reconcileWork(id), opts.reconciler ?? DNS_RECONCILER_DEFAULTS);
  }

  // -------------------------------------------------------------------------------------------
  // Providers

  countProviders(scope: TeamScope) {
    return this.db.dnsProvider.count({ where: scope.inTeam });
  }

  listProviders(scope: TeamScope, window: Window): Promise<DnsProviderRecord[]> {
    return this.db.dnsProvider.findMany({ where: scope.inTeam, orderBy: { id: "asc" }, include: providerInclude, ...window });
  }

  async getProvider(scope: TeamScope, uuid: string): Promise<DnsProviderRecord> {
    const p = await this.db.dnsProvider.findFirst({ where: { uuid, ...scope.inTeam }, include: providerInclude });
    if (!p) throw new NotFound("DNS provider");
    return p;
  }

  async createProvider(scope: TeamScope, input: CreateDnsProviderBody): Promise<DnsProviderRecord> {
    // The free tier has one provider; more are DNS_MULTI_DOMAIN (spec 4.14).
    if ((await this.countProviders(scope)) >= 1) requireFeature(scope.caller, "DNS_MULTI_DOMAIN");
    return this.db.dnsProvider.create({
      data: { uuid: newUuid(), teamId: scope.teamId, name: input.name, type: input.type, credentials: this.box.seal(JSON.stringify(input.credentials)) },
      include: providerInclude,
    });
  }

  /** Refused while domains use the provider: their records would be left without anyone to manage them. */
  async removeProvider(scope: TeamScope, uuid: string): Promise<void> {
    const p = await this.getProvider(scope, uuid);
    if (p._count.domains > 0) throw new Conflict(`This DNS provider is still used by ${p._count.domains} domain(s); delete them first. Nothing was deleted.`);
    try {
      await this.db.dnsProvider.delete({ where: { id: p.id } });
    } catch (err) {
      // A domain created meanwhile holds it (onDelete: Restrict).
      if ((err as { code?: string }).code === "P2003") throw new Conflict("This DNS provider is still used by a domain; delete it first. Nothing was deleted.");
      throw err;
    }
  }

  /** The credentials as stored, opened. */
  config(p: { type: string; credentials: string }): ProviderConfig {
    return { type: p.type as DnsProviderType, credentials: JSON.parse(this.box.open(p.credentials)) } as ProviderConfig;
  }

  private provider(p: { type: string; credentials: string }): DnsProvider {
    return createProvider(this.config(p), { userFetch: this.opts.userFetch, fetch: this.opts.fetch, allowPrivate: this.opts.allowPrivate, cloudflareApiUrl: this.opts.cloudflareApiUrl });
  }

  /** Credentials with every secret masked, for responses. */
  maskedCredentials(p: { type: string; credentials: string }): Record<string, string | number> {
    let c: Record<string, string | number>;
    try {
      c = this.config(p).credentials as unknown as Record<string, string | number>;
    } catch {
      return {};
    }
    const out: Record<string, string | number> = {};
    for (const [k, v] of Object.entries(c)) {
      if (k === "secret") out[k] = "****";
      else if (k === "api_token" || k === "api_key") out[k] = typeof v === "string" && v.length >= 16 ? `****${v.slice(-4)}` : "****";
      else out[k] = v;
    }
    return out;
  }

  /** Tests the credentials against the provider; never an HTTP error for a failed test. Records the result. */
  async testProvider(scope: TeamScope, uuid: string): Promise<{ connected: boolean; error?: string }> {
    const p = await this.getProvider(scope, uuid);
    const r = await withTimeout(this.provider(p).testCredentials(), "The provider did not answer in time.").catch((err: unknown) => ({ ok: false as const, error: (err as Error).message }));
    const outcome = r.ok ? { connected: true } : { connected: false, error: shortReason(r.error) };
    await this.db.dnsProvider.updateMany({
      where: { id: p.id, updatedAt: p.updatedAt },
      data: { isUsable: outcome.connected, lastTestedAt: new Date(), lastTestError: outcome.error ?? null },
    });
    return outcome;
  }

  // -------------------------------------------------------------------------------------------
  // Domains

  countDomains(scope: TeamScope) {
    return this.db.dnsDomain.count({ where: scope.inTeam });
  }

  listDomains(scope: TeamScope, window: Window): Promise<DnsDomainRecord[]> {
    return this.db.dnsDomain.findMany({ where: scope.inTeam, orderBy: { id: "asc" }, include: domainInclude, ...window });
  }

  async getDomain(scope: TeamScope, uuid: string): Promise<DnsDomainRecord> {
    const d = await this.db.dnsDomain.findFirst({ where: { uuid, ...scope.inTeam }, include: domainInclude });
    if (!d) throw new NotFound("Domain");
    return d;
  }

  async createDomain(scope: TeamScope, input: CreateManagedDomainBody): Promise<DnsDomainRecord> {
    const provider = await this.db.dnsProvider.findFirst({ where: { uuid: input.dns_provider_uuid, ...scope.inTeam } });
    if (!provider) throw new NotFound("DNS provider");
    const server = input.server_uuid === undefined ? null : await scope.server(input.server_uuid);
    const rfcZone = provider.type === "rfc2136" ? (this.config(provider).credentials as { zone: string }).zone : undefined;
    const zone = input.zone ?? rfcZone ?? input.name;
    if (rfcZone && zone !== rfcZone) throw new Invalid({ zone: [`This RFC 2136 provider updates the zone ${rfcZone} only.`] });
    if (input.name !== zone && !input.name.endsWith(`.${zone}`)) throw new Invalid({ zone: [`The domain ${input.name} is not in the zone ${zone}: use the domain itself or one of its parents.`] });
    if (modeNeedsServer(input.routing_mode) && !server) throw new Invalid({ server_uuid: [`The ${input.routing_mode} mode points *.${input.name} at a server: name it.`] });
    if (await this.db.dnsDomain.findFirst({ where: { name: input.name, ...scope.inTeam } })) throw new Conflict(`The domain ${input.name} is managed already.`);
    try {
      return await this.db.dnsDomain.create({
        data: { uuid: newUuid(), teamId: scope.teamId, name: input.name, zone, dnsProviderId: provider.id, routingMode: input.routing_mode, serverId: server?.id ?? null },
        include: domainInclude,
      });
    } catch (err) {
      if ((err as { code?: string }).code === "P2002") throw new Conflict(`The domain ${input.name} is managed already.`);
      throw err;
    }
  }

  /**
   * Deletes the domain after removing the records it owns (a reconcile wanting nothing: only
   * records with its marker go; a domain never synced wrote none). When the provider cannot be reached the domain is kept and the
   * reason given (409): deleting it would leave its records behind with nobody to remove them.
   */
  async removeDomain(scope: TeamScope, uuid: string): Promise<void> {
    const found = await this.getDomain(scope, uuid);
    // The domain's reconcile slot, claimed like a reconcile: a reconcile running now would write
    // records after ours are removed and leave them behind with nobody to remove them. A run
    // usually ends within moments, so the claim is retried for a few seconds before the 409.
    const deadline = Date.now() + DELETE_WAIT_MS;
    for (;;) {
      const claimed = await this.db.dnsDomain.updateMany({ where: { id: found.id, reconcileState: { in: ["idle", "pending"] } }, data: { reconcileState: "running", reconcileHeartbeatAt: new Date() } });
      if (claimed.count > 0) break;
      if (!(await this.db.dnsDomain.count({ where: { id: found.id } }))) throw new NotFound("Domain");
      if (Date.now() >= deadline) throw new Conflict("A reconcile of this domain is running; delete it again when it has ended (GET /domains/{uuid} shows reconcile.state). Nothing was deleted.");
      await new Promise((r) => setTimeout(r, 100));
    }
    // Read again under the claim: a reconcile may have ended just before it.
    const d = await this.db.dnsDomain.findUniqueOrThrow({ where: { id: found.id }, include: domainInclude });
    // Never synced successfully: nothing was written, there is nothing to remove.
    if (d.lastSyncedAt === null) {
      await this.db.dnsDomain.deleteMany({ where: { id: d.id } });
      return;
    }
    const row = await this.db.dnsProvider.findUniqueOrThrow({ where: { id: d.dnsProviderId } });
    try {
      await withTimeout(
        (async () => {
          await this.planZone(row, d, [], true);
          return { ok: true as const };
        })().catch((err: unknown) => ({ ok: false as const, error: (err as Error).message })),
        "The provider did not answer in time.",
      ).then((r) => {
        if (!r.ok) throw new Error(r.error);
      });
    } catch (err) {
      await this.db.dnsDomain.updateMany({ where: { id: d.id, reconcileState: "running" }, data: { reconcileState: "idle", reconcileHeartbeatAt: null } });
      throw new Conflict(`The domain's records could not be removed from the provider (${shortReason((err as Error).message)}); the domain was kept. Fix the provider and delete again.`);
    }
    await this.db.dnsDomain.deleteMany({ where: { id: d.id } });
  }

  /**
   * The records the domain's routing mode wants: the wildcard to its server (wildcard, hybrid),
   * and (per_hostname, hybrid) one record per application hostname under the domain, to the
   * application's server, read from the applications as they are now: a changed fqdn or a
   * deleted application drops out of this set, so the next sync removes its record. In hybrid
   * mode, applications on the wildcard's server need no record of their own.
   */
  private async desired(d: DnsDomainRecord): Promise<RecordData[]> {
    const out: RecordData[] = [];
    const mode = d.routingMode as RoutingMode;
    if (modeNeedsServer(mode) && d.server) out.push(pointAt(`*.${d.name}`, d.server.ip));
    if (mode === "wildcard") return out;
    const ctx = await this.bindingContext(d.teamId);
    const taken = new Set(out.map((r) => r.name));
    for (const h of await this.teamHosts(d.teamId)) {
      // w6: a hostname binds to one domain (bindings.ts); another domain covering it leaves it alone.
      const bound = bindHost(h.host, h.environment, ctx);
      if (!bound || bound.domain.id !== d.id) continue;
      if (mode === "hybrid" && h.serverId === d.serverId) continue;
      if (taken.has(h.host)) continue;
      // The first resource (applications, then services, oldest first) naming a host gets it; the proxy routes it the same way.
      taken.add(h.host);
      out.push(pointAt(h.host, h.serverIp));
    }
    return out;
  }

  /** The team's domains, pins and environment bindings: what bindHost decides with. */
  private async bindingContext(teamId: number): Promise<BindingContext<DomainLite>> {
    const [domains, pins, bindings] = await Promise.all([
      this.db.dnsDomain.findMany({ where: { teamId }, orderBy: { id: "asc" }, select: domainLiteSelect }),
      this.db.dnsHostnamePin.findMany({ where: { teamId }, select: { hostname: true, dnsDomainId: true } }),
      this.db.dnsEnvironmentBinding.findMany({ where: { domain: { teamId } }, orderBy: { id: "asc" } }),
    ]);
    return { domains, pins: new Map(pins.map((p) => [p.hostname, p.dnsDomainId])), bindings };
  }

  /**
   * Every hostname of the team's resources: applications' fqdns, then (w6) services'
   * component domains, each with the server it runs on and its environment.
   */
  private async teamHosts(teamId: number, only?: { type: DnsResourceType; id: number }): Promise<TeamHost[]> {
    const out: TeamHost[] = [];
    const env = { select: { id: true, name: true } } as const;
    if (!only || only.type === "application") {
      const apps = await this.db.application.findMany({
        where: { teamId, fqdn: { not: null }, ...(only ? { id: only.id } : {}) },
        orderBy: { id: "asc" },
        select: { id: true, fqdn: true, serverId: true, server: { select: { ip: true } }, environment: env },
      });
      for (const a of apps) for (const host of hostsOf(a.fqdn)) out.push({ host, component: null, serverId: a.serverId, serverIp: a.server.ip, environment: a.environment, resource: { type: "application", id: a.id } });
    }
    if (!only || only.type === "service") {
      const services = await this.db.service.findMany({
        where: { teamId, ...(only ? { id: only.id } : {}) },
        orderBy: { id: "asc" },
        select: { id: true, serverId: true, server: { select: { ip: true } }, environment: env, components: { where: { fqdn: { not: null } }, orderBy: { id: "asc" }, select: { name: true, fqdn: true } } },
      });
      for (const s of services)
        for (const c of s.components)
          for (const host of hostsOf(c.fqdn)) out.push({ host, component: c.name, serverId: s.serverId, serverIp: s.server.ip, environment: s.environment, resource: { type: "service", id: s.id } });
    }
    return out;
  }

  /**
   * Records follow resources (w5): an application's hostnames changed (`fqdns`: its fqdn values
   * before and after). Every per_hostname or hybrid domain of the team that one of the hosts
   * falls under gets a reconcile dispatched (wildcard domains do not depend on hostnames). The
   * reconcile reads the applications as they are then, so the old name's record (carrying our
   * marker) goes and the new one is written; a record without our marker is never touched.
   * Dispatching is a row update: it never fails the application's request over the provider.
   */
  async hostsChanged(teamId: number, fqdns: (string | null)[]): Promise<void> {
    const hosts = new Set(fqdns.flatMap(hostsOf));
    if (!hosts.size) return;
    const domains = await this.db.dnsDomain.findMany({ where: { teamId, routingMode: { in: ["per_hostname", "hybrid"] } }, select: { id: true, name: true } });
    for (const d of domains) {
      if ([...hosts].some((h) => covers(d.name, h))) await this.reconciler.request(d.id);
    }
  }

  /**
   * POST /domains/{uuid}/sync: dispatches the domain's reconcile job (reconciler.ts) and answers
   * at once; GET /domains/{uuid} shows its state and, once it ran, its outcome. "already" when a
   * reconcile is due or running (a running one runs once more, so this request is honoured).
   */
  async requestSync(scope: TeamScope, uuid: string): Promise<{ dispatch: ReconcileDispatch; domain: DnsDomainRecord }> {
    const d = await this.getDomain(scope, uuid);
    if (modeNeedsServer(d.routingMode as RoutingMode) && !d.server) {
      throw new Conflict(`The ${d.routingMode} mode points *.${d.name} at a server, and the domain has none (its server was deleted). Nothing was changed.`);
    }
    const dispatch = await this.reconciler.request(d.id);
    return { dispatch, domain: await this.getDomain(scope, uuid) };
  }

  /**
   * One reconcile (the job's work): plan, then apply (reconcile.ts): the wildcard record of
   * wildcard and hybrid modes, pointing at the domain's server; records the domain owns and no
   * longer wants go. A name held by a record without our marker is reported as drift and left
   * alone. A provider failure is an outcome (sync_status error with the reason), not a throw.
   * Returns the row's outcome columns; the reconciler writes them as it ends the run.
   */
  private async reconcileWork(id: number): Promise<Prisma.DnsDomainUpdateManyMutationInput> {
    const d = await this.db.dnsDomain.findUnique({ where: { id }, include: domainInclude });
    if (!d) return {};
    const outcome = await this.reconcileDomain(d);
    const drifted = new Set(outcome.plan.drift.map((x) => x.name));
    // w6: a hostname this domain gave up may now bind to another domain of the team (a pin, an
    // environment binding), which saw our record in its way if it ran first: it runs again.
    const released = outcome.plan.deletes.filter((r) => r.type !== "TXT").map((r) => bareName(r.name));
    if (released.length) {
      const others = await this.db.dnsDomain.findMany({ where: { teamId: d.teamId, id: { not: d.id }, routingMode: { in: ["per_hostname", "hybrid"] } }, select: { id: true, name: true } });
      for (const o of others) if (released.some((h) => covers(o.name, h))) await this.reconciler.request(o.id);
    }
    return {
      ...(outcome.status === "error" ? {} : { lastDesired: JSON.stringify((outcome.desired ?? []).filter((r) => !drifted.has(bareName(r.name))).map(rec)) }),
      syncStatus: outcome.status,
      syncError: outcome.error ?? null,
      drift: JSON.stringify(outcome.plan.drift satisfies Drift[]),
      ...(outcome.status === "error" ? {} : { lastSyncedAt: new Date(), lastApplied: JSON.stringify(appliedOf(outcome.plan)) }),
    };
  }

  /**
   * The domain's plan against the zone as it is now (`desired`: routing records to servers'
   * addresses), applied when `apply`. A cloudflare_tunnel provider turns them into proxied
   * CNAMEs to its tunnel and ingress rules merged into the tunnel's configuration (tunnel.ts);
   * `desired` then answers the CNAMEs. Ingress changes show in the plan as type INGRESS.
   */
  private async planZone(
    row: { type: string; credentials: string },
    d: { id: number; uuid: string; zone: string; dnsProviderId: number; teamId: number },
    desired: RecordData[],
    apply: boolean,
  ): Promise<{ plan: Plan; desired: RecordData[] }> {
    const p = this.provider(row);
    if (p instanceof CloudflareTunnelProvider) {
      const out = await withTunnelLock(`${p.tunnel.account_id}/${p.tunnel.tunnel_id}`, async () => {
        const read = await p.readConfig();
        const tp = planTunnel(await p.listRecords(d.zone), read.config, desired, d.uuid, p.target, RECORD_TTL);
        const raced = apply ? (await applyTunnel(p, d.zone, tp, read.version)).raced : false;
        return { plan: tp.shown, desired: tp.desired, raced };
      });
      // Our write may have dropped another writer's change: the other domains on this provider
      // reconcile again, each putting back what it owns (another replica's reconcile is not seen
      // by the in-process lock).
      if (out.raced) {
        const siblings = await this.db.dnsDomain.findMany({ where: { teamId: d.teamId, dnsProviderId: d.dnsProviderId, id: { not: d.id } }, select: { id: true } });
        for (const s of siblings) await this.reconciler.request(s.id);
      }
      return { plan: out.plan, desired: out.desired };
    }
    const plan = planZone(await p.listRecords(d.zone), desired, d.uuid, RECORD_TTL);
    if (apply) await applyPlan(p, d.zone, plan);
    return { plan, desired };
  }

  private async reconcileDomain(d: DnsDomainRecord): Promise<SyncOutcome> {
    const empty: Plan = { creates: [], updates: [], deletes: [], drift: [] };
    if (modeNeedsServer(d.routingMode as RoutingMode) && !d.server) {
      return { status: "error", plan: empty, error: `The ${d.routingMode} mode points *.${d.name} at a server, and the domain has none (its server was deleted).` };
    }
    try {
      const row = await this.db.dnsProvider.findUniqueOrThrow({ where: { id: d.dnsProviderId } });
      const plan = await withTimeout(
        (async () => this.planZone(row, d, await this.desired(d), true))(),
        "The provider did not answer in time.",
      );
      return { status: plan.plan.drift.length ? "drifted" : "synced", plan: plan.plan, desired: plan.desired };
    } catch (err) {
      return { status: "error", plan: empty, error: shortReason((err as Error).message) };
    }
  }

  // -------------------------------------------------------------------------------------------
  // ---- dns resources and environment bindings (issue 21, w6) ----

  /** An application or service of the scope with the need, as {type, id}. */
  private async resource(scope: TeamScope, type: DnsResourceType, uuid: string, need: "view" | "deploy" | "manage"): Promise<{ type: DnsResourceType; id: number }> {
    const row = type === "application" ? await scope.application(uuid, need) : await scope.service(uuid, need);
    return { type, id: row.id };
  }

  /**
   * GET /dns/resource/{type}/{uuid}: each hostname of the resource, the domain it binds to and
   * why (bindings.ts), the record that serves it and its sync state, read from the domain's row
   * (the provider is not contacted): pending while a reconcile is due or running or when the
   * last reconcile did not want this record yet; error when it failed; drifted when a foreign
   * record holds the name; synced when the last reconcile wrote (or found) it.
   */
  async resourceHostnames(scope: TeamScope, type: DnsResourceType, uuid: string, need: "view" | "manage" = "view"): Promise<HostnameState[]> {
    const res = await this.resource(scope, type, uuid, need);
    return this.hostnameStates(scope.teamId, res);
  }

  private async hostnameStates(teamId: number, res: { type: DnsResourceType; id: number }): Promise<HostnameState[]> {
    const [hosts, ctx, tunnels] = await Promise.all([this.teamHosts(teamId, res), this.bindingContext(teamId), this.tunnelTargets(teamId)]);
    const out: HostnameState[] = [];
    const seen = new Set<string>();
    for (const h of hosts) {
      const key = `${h.component ?? ""}\u0000${h.host}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const bound = bindHost(h.host, h.environment, ctx);
      if (!bound) {
        out.push({ hostname: h.host, component: h.component, state: "unmanaged", domain: null, binding: null, record: null, error: null });
        continue;
      }
      const d = bound.domain;
      const viaWildcard = d.routingMode === "wildcard" || (d.routingMode === "hybrid" && h.serverId === d.serverId);
      const direct = viaWildcard ? (d.server ? rec(pointAt(`*.${d.name}`, d.server.ip)) : null) : rec(pointAt(h.host, h.serverIp));
      // cloudflare_tunnel (w7): the name's record is a proxied CNAME to the tunnel.
      const tunnel = tunnels.get(d.id);
      const record = direct && tunnel ? { name: direct.name, type: "CNAME", content: tunnel } : direct;
      const base = { hostname: h.host, component: h.component, domain: { uuid: d.uuid, name: d.name }, binding: bound.binding, record };
      if (!record) {
        out.push({ ...base, state: "error", error: `The ${d.routingMode} mode points *.${d.name} at a server, and the domain has none (its server was deleted).` });
        continue;
      }
      const drift = parseJson<Drift[]>(d.drift, []).find((x) => x.name === record.name);
      const applied = parseJson<{ name: string; type: string; content: string }[]>(d.lastDesired, []);
      if (d.reconcileState !== "idle") out.push({ ...base, state: "pending", error: null });
      else if (d.syncStatus === "error") out.push({ ...base, state: "error", error: d.syncError });
      else if (drift) out.push({ ...base, state: "drifted", error: drift.reason });
      else if (d.lastSyncedAt && applied.some((r) => r.name === record.name && r.type === record.type && r.content === record.content)) out.push({ ...base, state: "synced", error: null });
      else out.push({ ...base, state: "pending", error: null });
    }
    return out;
  }

  /** cloudflare_tunnel (w7): the CNAME target of each of the team's domains on a tunnel provider. */
  private async tunnelTargets(teamId: number): Promise<Map<number, string>> {
    const rows = await this.db.dnsDomain.findMany({ where: { teamId, provider: { type: "cloudflare_tunnel" } }, select: { id: true, provider: { select: { type: true, credentials: true } } } });
    const out = new Map<number, string>();
    for (const r of rows) {
      try {
        out.set(r.id, tunnelTarget((this.config(r.provider).credentials as { tunnel_id: string }).tunnel_id));
      } catch {
        /* unreadable credentials: shown like the other providers */
      }
    }
    return out;
  }

  /** Every domain covering one of the resource's hostnames (whatever it binds to: a domain losing a hostname removes its record). */
  private async domainsCovering(teamId: number, hosts: string[]): Promise<DomainLite[]> {
    const domains = await this.db.dnsDomain.findMany({ where: { teamId }, orderBy: { id: "asc" }, select: domainLiteSelect });
    return domains.filter((d) => hosts.some((h) => covers(d.name, h)));
  }

  /**
   * POST /dns/resource/{type}/{uuid}/resync: dispatches the reconcile of every domain one of
   * the resource's hostnames falls under. dry_run (beyond the spec): dispatches nothing and
   * answers each domain's plan as it would run now, limited to the resource's names, their
   * wildcard and their ownership markers (the rest of the domain may belong to resources the
   * caller cannot see).
   */
  async resync(scope: TeamScope, type: DnsResourceType, uuid: string): Promise<{ domain: DomainLite; dispatch: ReconcileDispatch }[]> {
    const res = await this.resource(scope, type, uuid, "deploy");
    const hosts = (await this.teamHosts(scope.teamId, res)).map((h) => h.host);
    const out: { domain: DomainLite; dispatch: ReconcileDispatch }[] = [];
    for (const d of await this.domainsCovering(scope.teamId, hosts)) out.push({ domain: d, dispatch: await this.reconciler.request(d.id) });
    return out;
  }

  async resyncPlan(scope: TeamScope, type: DnsResourceType, uuid: string): Promise<{ domain: DomainLite; plan: Plan; error: string | null }[]> {
    const res = await this.resource(scope, type, uuid, "deploy");
    const hosts = [...new Set((await this.teamHosts(scope.teamId, res)).map((h) => h.host))];
    const out: { domain: DomainLite; plan: Plan; error: string | null }[] = [];
    for (const lite of await this.domainsCovering(scope.teamId, hosts)) {
      const empty: Plan = { creates: [], updates: [], deletes: [], drift: [] };
      const d = await this.db.dnsDomain.findUnique({ where: { id: lite.id }, include: domainInclude });
      if (!d) continue;
      if (modeNeedsServer(d.routingMode as RoutingMode) && !d.server) {
        out.push({ domain: lite, plan: empty, error: `The ${d.routingMode} mode points *.${d.name} at a server, and the domain has none (its server was deleted).` });
        continue;
      }
      const names = new Set([...hosts, `*.${d.name}`]);
      for (const n of [...names]) names.add(markerName(n));
      const mine = (r: { name: string }) => names.has(bareName(r.name));
      try {
        const row = await this.db.dnsProvider.findUniqueOrThrow({ where: { id: d.dnsProviderId } });
        const { plan } = await withTimeout((async () => this.planZone(row, d, await this.desired(d), false))(), "The provider did not answer in time.");
        out.push({
          domain: lite,
          plan: { creates: plan.creates.filter(mine), updates: plan.updates.filter((u) => mine(u.record)), deletes: plan.deletes.filter(mine), drift: plan.drift.filter(mine) },
          error: null,
        });
      } catch (err) {
        out.push({ domain: lite, plan: empty, error: shortReason((err as Error).message) });
      }
    }
    return out;
  }

  /**
   * POST /dns/resource/{type}/{uuid}/assign-domain (DNS_MULTI_DOMAIN): pins one of the
   * resource's hostnames to a managed domain covering it (binding "override"), or with null
   * removes the pin. Every domain covering the hostname is reconciled (the one losing it
   * removes its record, the one getting it writes it). Answers the resource's hostnames.
   */
  async assignDomain(scope: TeamScope, type: DnsResourceType, uuid: string, body: AssignDomainBody): Promise<HostnameState[]> {
    requireFeature(scope.caller, "DNS_MULTI_DOMAIN");
    const res = await this.resource(scope, type, uuid, "manage");
    const hosts = (await this.teamHosts(scope.teamId, res)).map((h) => h.host);
    const host = body.hostname.replace(/\.$/, "");
    if (!hosts.includes(host)) throw new Invalid({ hostname: [`${host} is not a hostname of this ${type} (${hosts.length ? hosts.join(", ") : "it has none"}).`] });
    if (body.domain_uuid === null) {
      await this.db.dnsHostnamePin.deleteMany({ where: { teamId: scope.teamId, hostname: host } });
    } else {
      const d = await this.getDomain(scope, body.domain_uuid);
      if (!covers(d.name, host)) throw new Invalid({ domain_uuid: [`The domain ${d.name} does not cover ${host}: its records can only be written under ${d.name}.`] });
      await this.db.dnsHostnamePin.upsert({
        where: { teamId_hostname: { teamId: scope.teamId, hostname: host } },
        create: { teamId: scope.teamId, hostname: host, dnsDomainId: d.id },
        update: { dnsDomainId: d.id },
      });
    }
    for (const d of await this.domainsCovering(scope.teamId, [host])) if (d.routingMode !== "wildcard") await this.reconciler.request(d.id);
    return this.hostnameStates(scope.teamId, res);
  }

  /** Environment bindings of a domain (DNS_ENV_BINDINGS), oldest first. */
  async listBindings(scope: TeamScope, domainUuid: string) {
    requireFeature(scope.caller, "DNS_ENV_BINDINGS");
    const d = await this.getDomain(scope, domainUuid);
    return { domain: d, bindings: await this.db.dnsEnvironmentBinding.findMany({ where: { dnsDomainId: d.id }, orderBy: { id: "asc" } }) };
  }

  /**
   * Binds an environment of the team (by id; no visibility check: domains are a team-admin
   * matter, like grants) or an environment role (every environment of that name) to the
   * domain. The team's per_hostname and hybrid domains are reconciled: hostnames may move.
   */
  async createBinding(scope: TeamScope, domainUuid: string, body: EnvironmentBindingBody) {
    requireFeature(scope.caller, "DNS_ENV_BINDINGS");
    const d = await this.getDomain(scope, domainUuid);
    const env = body.environment_id === undefined ? null : await scope.environmentById(body.environment_id);
    const binding = await this.db.dnsEnvironmentBinding.create({
      data: { dnsDomainId: d.id, environmentId: env?.id ?? null, environmentRole: env ? null : body.environment_role!, priority: body.priority },
    });
    await this.bindingsChanged(scope.teamId);
    return { domain: d, binding };
  }

  async removeBinding(scope: TeamScope, domainUuid: string, id: number): Promise<void> {
    requireFeature(scope.caller, "DNS_ENV_BINDINGS");
    const d = await this.getDomain(scope, domainUuid);
    const gone = await this.db.dnsEnvironmentBinding.deleteMany({ where: { id, dnsDomainId: d.id } });
    if (gone.count === 0) throw new NotFound("Environment binding");
    await this.bindingsChanged(scope.teamId);
  }

  private async bindingsChanged(teamId: number): Promise<void> {
    const domains = await this.db.dnsDomain.findMany({ where: { teamId, routingMode: { in: ["per_hostname", "hybrid"] } }, select: { id: true } });
    for (const d of domains) await this.reconciler.request(d.id);
  }
}

export interface AppliedRecords {
  created: { name: string; type: string; content: string }[];
  updated: { name: string; type: string; content: string }[];
  deleted: { name: string; type: string; content: string }[];
}

const rec = (r: { name: string; type: string; content: string }) => ({ name: r.name, type: r.type, content: r.content });

function appliedOf(plan: Plan): AppliedRecords {
  return { created: plan.creates.map(rec), updated: plan.updates.map((u) => rec(u.record)), deleted: plan.deletes.map(rec) };
}

/** A record pointing a name at a server's address: A, AAAA, or CNAME when the server was added by name. */
function pointAt(name: string, target: string): RecordData {
  const family = isIP(target);
  return { name, type: family === 4 ? "A" : family === 6 ? "AAAA" : "CNAME", content: target, ttl: RECORD_TTL };
}

function modeNeedsServer(mode: RoutingMode): boolean {
  return mode === "wildcard" || mode === "hybrid";
}

async function withTimeout<T>(work: Promise<T>, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(message)), DNS_CALL_TIMEOUT_MS);
        timer.unref();
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

// ---- dns resources (issue 21, w6) ----

const domainLiteSelect = {
  id: true,
  uuid: true,
  name: true,
  routingMode: true,
  serverId: true,
  server: { select: { ip: true } },
  syncStatus: true,
  syncError: true,
  drift: true,
  reconcileState: true,
  lastDesired: true,
  lastSyncedAt: true,
} satisfies Prisma.DnsDomainSelect;
export type DomainLite = Prisma.DnsDomainGetPayload<{ select: typeof domainLiteSelect }>;

interface TeamHost {
  host: string;
  component: string | null;
  serverId: number;
  serverIp: string;
  environment: { id: number; name: string };
  resource: { type: DnsResourceType; id: number };
}

export interface HostnameState {
  hostname: string;
  component: string | null;
  state: "synced" | "pending" | "error" | "drifted" | "unmanaged";
  domain: { uuid: string; name: string } | null;
  binding: HostBinding | null;
  record: { name: string; type: string; content: string } | null;
  error: string | null;
}

function hostsOf(fqdn: string | null): string[] {
  if (!fqdn) return [];
  const parsed = parseDomains(fqdn);
  if ("errors" in parsed) return [];
  return parsed.entries.map((e) => e.host.toLowerCase());
}

function parseJson<T>(json: string, fallback: T): T {
  try {
    return JSON.parse(json) as T;
  } catch {
    return fallback;
  }
}
