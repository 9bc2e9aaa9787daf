import {
  CreateDnsProviderBody,
  CreateManagedDomainBody,
  DnsProvider,
  DnsProviderList,
  DnsProviderMutation,
  DnsProviderParams,
  DnsProviderTestResult,
  ManagedDomain,
  ManagedDomainList,
  ManagedDomainMutation,
  ManagedDomainParams,
  DomainSyncDispatch,
  MessageBody,
  PaginationQuery,
  AssignDomainBody,
  DnsResourceParams,
  DnsResourceState,
  DnsResyncDispatch,
  DnsResyncPlan,
  DnsResyncQuery,
  EnvironmentBindingBody,
  EnvironmentBindingList,
  EnvironmentBindingMutation,
  EnvironmentBindingParams,
} from "@capstan/shared";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { dnsProviderDto, domainDto, domainPlanDto, environmentBindingDto, resourceStateDto } from "../mappers/dns.js";

/** DNS (spec 4.14, issue 21; docs/dns.md). Every route needs DNS_PROVIDER_MANAGEMENT. */
const TAG = "DNS";
const FEATURE = "DNS_PROVIDER_MANAGEMENT" as const;
/** Pro routes (w6): checked by the service after DNS_PROVIDER_MANAGEMENT, as for a second provider. */
const PRO_402 = "402 also when the team lacks";

export const dnsRoutes = [
  route({
    method: "get",
    path: "/dns-providers",
    tag: TAG,
    feature: FEATURE,
    summary: "List DNS providers",
    description: "Credentials are masked.",
    query: PaginationQuery,
    responses: { 200: { description: "DNS providers", schema: DnsProviderList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      const dns = services.dns;
      return { body: await paginate(query, () => dns.countProviders(scope), async (w) => (await dns.listProviders(scope, w)).map((p) => dnsProviderDto(p, dns))) };
    },
  }),
  route({
    method: "post",
    path: "/dns-providers",
    tag: TAG,
    feature: FEATURE,
    summary: "Add a DNS provider",
    adminOnly: "manage DNS providers",
    description: `type cloudflare (api_token), powerdns (api_url, api_key, server_id), rfc2136 (server, port, zone, key_name, algorithm, secret) or cloudflare_tunnel (api_token, account_id, tunnel_id: the tunnel's ingress rules and proxied CNAMEs are maintained). Credentials are stored encrypted and returned masked. The free tier allows one provider; a second needs DNS_MULTI_DOMAIN (402). The provider is not contacted: test it with POST /dns-providers/{uuid}/test.`,
    body: CreateDnsProviderBody,
    responses: { 201: { description: "Created", schema: DnsProviderMutation }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const p = await services.dns.createProvider(scope, body);
      return { status: 201, body: { message: "DNS provider created.", data: dnsProviderDto(p, services.dns) } };
    },
  }),
  route({
    method: "get",
    path: "/dns-providers/{uuid}",
    tag: TAG,
    feature: FEATURE,
    summary: "Get a DNS provider",
    params: DnsProviderParams,
    responses: { 200: { description: "DNS provider", schema: DnsProvider }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: dnsProviderDto(await services.dns.getProvider(scope, params.uuid), services.dns) };
    },
  }),
  route({
    method: "delete",
    path: "/dns-providers/{uuid}",
    tag: TAG,
    feature: FEATURE,
    summary: "Delete a DNS provider",
    adminOnly: "manage DNS providers",
    description: `Refused (409) while domains use it. Records at the provider are not touched.`,
    params: DnsProviderParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "Domains still use the provider" } },
    async handler({ scope, services, params }) {
      await services.dns.removeProvider(scope, params.uuid);
      return { body: { message: "DNS provider deleted." } };
    },
  }),
  route({
    method: "post",
    path: "/dns-providers/{uuid}/test",
    tag: TAG,
    feature: FEATURE,
    summary: "Test a DNS provider's credentials",
    adminOnly: "test DNS providers",
    description: `Cloudflare: the token is verified; PowerDNS: the API answers with the key; RFC 2136: a no-op signed update and a signed zone transfer succeed. A failed test is not an HTTP error: 200 with connected false and a short reason. Records is_usable and last_tested_at.`,
    params: DnsProviderParams,
    responses: { 200: { description: "Connection status", schema: DnsProviderTestResult }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const r = await services.dns.testProvider(scope, params.uuid);
      return {
        body: r.connected
          ? { message: "The DNS provider accepted the credentials.", connected: true }
          : { message: "The DNS provider could not be used.", connected: false, error: r.error ?? "unknown error" },
      };
    },
  }),
  route({
    method: "get",
    path: "/domains",
    tag: TAG,
    feature: FEATURE,
    summary: "List managed domains",
    query: PaginationQuery,
    responses: { 200: { description: "Managed domains", schema: ManagedDomainList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return { body: await paginate(query, () => services.dns.countDomains(scope), async (w) => (await services.dns.listDomains(scope, w)).map(domainDto)) };
    },
  }),
  route({
    method: "post",
    path: "/domains",
    tag: TAG,
    feature: FEATURE,
    summary: "Add a managed domain",
    adminOnly: "manage domains",
    description: `routing_mode wildcard (default) or hybrid points *.<name> at server_uuid's address (needs server_uuid); per_hostname writes no wildcard. zone: the provider's zone holding the records (default: the domain; rfc2136: the provider's zone). Nothing is written until POST /domains/{uuid}/sync.`,
    body: CreateManagedDomainBody,
    responses: { 201: { description: "Created", schema: ManagedDomainMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: ERR[409], 422: ERR[422] },
    async handler({ scope, services, body }) {
      return { status: 201, body: { message: "Domain created.", data: domainDto(await services.dns.createDomain(scope, body)) } };
    },
  }),
  route({
    method: "get",
    path: "/domains/{uuid}",
    tag: TAG,
    feature: FEATURE,
    summary: "Get a managed domain",
    params: ManagedDomainParams,
    responses: { 200: { description: "Domain", schema: ManagedDomain }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: domainDto(await services.dns.getDomain(scope, params.uuid)) };
    },
  }),
  route({
    method: "delete",
    path: "/domains/{uuid}",
    tag: TAG,
    feature: FEATURE,
    summary: "Delete a managed domain",
    adminOnly: "manage domains",
    description: `First removes the records the domain created (only those carrying its ownership marker); when the provider fails, the domain is kept (409, with the reason).`,
    params: ManagedDomainParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "The provider could not remove the domain's records" } },
    async handler({ scope, services, params }) {
      await services.dns.removeDomain(scope, params.uuid);
      return { body: { message: "Domain deleted." } };
    },
  }),
  route({
    method: "post",
    path: "/domains/{uuid}/sync",
    tag: TAG,
    feature: FEATURE,
    summary: "Sync a managed domain's records",
    adminOnly: "sync domains",
    description: `Dispatches the domain's reconcile job and answers 202 at once (docs/dns.md); GET /domains/{uuid} shows reconcile.state (pending, running, idle) and, when it has run, sync_status, drift, sync_error and last_applied. One reconcile per domain runs at a time: when one is due or running already, dispatch is "already" (a running one runs once more afterwards). The job plans, then applies: wildcard and hybrid modes get *.<domain> pointing at the server (A, AAAA, or CNAME when the server's address is a name); per_hostname and hybrid modes get one record per application hostname under the domain, pointing at the application's server; each name gets a TXT ownership marker beside it; records the domain owns and no longer wants go. A record Capstan did not create is never changed or deleted: it is reported in drift (sync_status drifted). A provider failure is sync_status error with the reason.`,
    params: ManagedDomainParams,
    responses: { 202: { description: "Reconcile dispatched", schema: DomainSyncDispatch }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "The domain's server is gone" } },
    async handler({ scope, services, params }) {
      const r = await services.dns.requestSync(scope, params.uuid);
      return {
        status: 202,
        body: {
          message: r.dispatch === "dispatched" ? "Reconcile dispatched; watch reconcile.state and sync_status." : "A reconcile of this domain is already due or running; it covers this request. Watch reconcile.state and sync_status.",
          dispatch: r.dispatch,
          data: domainDto(r.domain),
        },
      };
    },
  }),
  // ---- dns resources and environment bindings (issue 21, w6) ----
  route({
    method: "get",
    path: "/dns/resource/{type}/{uuid}",
    tag: TAG,
    feature: FEATURE,
    summary: "A resource's managed hostnames and their sync state",
    description: `type application (its fqdn's hosts) or service (its components' domains). For each hostname: the managed domain it binds to and why (override: pinned with assign-domain; environment_binding; suffix_match: the most specific domain covering it), the record serving it (the wildcard in wildcard mode) and its state: synced, pending (a reconcile is due or running, or the change is not reconciled yet), error (the domain's last reconcile failed), drifted (a record Capstan did not create holds the name), unmanaged (no managed domain covers it). Read from Capstan's records; the provider is not contacted. Needs view on the resource.`,
    params: DnsResourceParams,
    responses: { 200: { description: "Hostnames", schema: DnsResourceState }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params }) {
      return { body: resourceStateDto(params.type, params.uuid, await services.dns.resourceHostnames(scope, params.type, params.uuid)) };
    },
  }),
  route({
    method: "post",
    path: "/dns/resource/{type}/{uuid}/resync",
    tag: TAG,
    feature: FEATURE,
    summary: "Reconcile the domains of a resource's hostnames",
    description: `Dispatches the reconcile job of every managed domain one of the resource's hostnames falls under (202; watch GET /dns/resource/{type}/{uuid}). dry_run=true (beyond the spec) dispatches nothing and answers 200 with each domain's plan as it would run now, limited to the resource's names, the domain's wildcard and their ownership markers; the provider is listed for it. Needs deploy on the resource.`,
    params: DnsResourceParams,
    query: DnsResyncQuery,
    responses: {
      200: { description: "dry_run: the plan", schema: DnsResyncPlan },
      202: { description: "Reconciles dispatched", schema: DnsResyncDispatch },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      422: ERR[422],
    },
    async handler({ scope, services, params, query }) {
      if (query.dry_run) {
        const plans = await services.dns.resyncPlan(scope, params.type, params.uuid);
        return { status: 200, body: { message: plans.length ? "Plan only; nothing was dispatched." : "No managed domain covers this resource's hostnames.", dry_run: true as const, plans: plans.map(domainPlanDto) } };
      }
      const r = await services.dns.resync(scope, params.type, params.uuid);
      return {
        status: 202,
        body: {
          message: r.length ? "Reconciles dispatched; watch GET /dns/resource/{type}/{uuid}." : "No managed domain covers this resource's hostnames; nothing was dispatched.",
          domains: r.map((x) => ({ uuid: x.domain.uuid, name: x.domain.name, dispatch: x.dispatch })),
        },
      };
    },
  }),
  route({
    method: "post",
    path: "/dns/resource/{type}/{uuid}/assign-domain",
    tag: TAG,
    feature: FEATURE,
    summary: "Pin or unpin a resource's hostname to a managed domain",
    description: `Pro: ${PRO_402} DNS_MULTI_DOMAIN. {hostname, domain_uuid}: the hostname (one of the resource's) binds to that domain (binding override), which must cover it (422 otherwise); domain_uuid null removes the pin. The domains covering the hostname are reconciled. Answers the resource's hostnames. Needs manage on the resource.`,
    params: DnsResourceParams,
    body: AssignDomainBody,
    responses: { 200: { description: "The resource's hostnames", schema: DnsResourceState }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      return { body: resourceStateDto(params.type, params.uuid, await services.dns.assignDomain(scope, params.type, params.uuid, body)) };
    },
  }),
  route({
    method: "get",
    path: "/domains/{uuid}/environment-bindings",
    tag: TAG,
    feature: FEATURE,
    summary: "List a domain's environment bindings",
    description: `Pro: ${PRO_402} DNS_ENV_BINDINGS.`,
    params: ManagedDomainParams,
    responses: { 200: { description: "Bindings", schema: EnvironmentBindingList }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const r = await services.dns.listBindings(scope, params.uuid);
      return { body: { data: r.bindings.map((b) => environmentBindingDto(r.domain.uuid, b)) } };
    },
  }),
  route({
    method: "post",
    path: "/domains/{uuid}/environment-bindings",
    tag: TAG,
    feature: FEATURE,
    summary: "Bind an environment or an environment role to a domain",
    adminOnly: "manage domains",
    description: `Pro: ${PRO_402} DNS_ENV_BINDINGS. {environment_id | environment_role, priority = 0}: hostnames of resources in that environment (or in every environment named like the role: preview, production...) that the domain covers bind to it, before the most specific domain; the highest priority wins among several bindings. The team's per_hostname and hybrid domains are reconciled.`,
    params: ManagedDomainParams,
    body: EnvironmentBindingBody,
    responses: { 201: { description: "Created", schema: EnvironmentBindingMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const r = await services.dns.createBinding(scope, params.uuid, body);
      return { status: 201, body: { message: "Environment binding created.", data: environmentBindingDto(r.domain.uuid, r.binding) } };
    },
  }),
  route({
    method: "delete",
    path: "/domains/{uuid}/environment-bindings/{bindingId}",
    tag: TAG,
    feature: FEATURE,
    summary: "Delete an environment binding",
    adminOnly: "manage domains",
    description: `Pro: ${PRO_402} DNS_ENV_BINDINGS. The team's per_hostname and hybrid domains are reconciled.`,
    params: EnvironmentBindingParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      await services.dns.removeBinding(scope, params.uuid, params.bindingId);
      return { body: { message: "Environment binding deleted." } };
    },
  }),
];
