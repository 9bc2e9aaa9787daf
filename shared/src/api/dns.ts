import { z } from "zod";
import { BodyId, IntId, Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";

/**
 * DNS (spec 4.14, issue 21): providers (where records are written) and managed domains (what
 * Capstan routes there). Provider credentials are write-only: responses carry them masked.
 * docs/dns.md explains the routing modes and the ownership markers.
 */

export const DNS_PROVIDER_TYPES = ["cloudflare", "powerdns", "rfc2136", "cloudflare_tunnel"] as const;
export const DnsProviderType = z.enum(DNS_PROVIDER_TYPES);
export type DnsProviderType = z.infer<typeof DnsProviderType>;

export const TSIG_ALGORITHM_NAMES = ["hmac-md5", "hmac-sha1", "hmac-sha224", "hmac-sha256", "hmac-sha384", "hmac-sha512"] as const;

export const ROUTING_MODES = ["wildcard", "per_hostname", "hybrid"] as const;
export const RoutingMode = z.enum(ROUTING_MODES).meta({
  description:
    "wildcard: one *.<domain> record to the server's address (sync writes it); per_hostname: one record per resource hostname, no wildcard; hybrid: both (docs/dns.md)",
});
export type RoutingMode = z.infer<typeof RoutingMode>;

const LABEL = "(?!-)[a-z0-9-]{1,63}(?<!-)";
const ZONE_RE = new RegExp(`^(${LABEL}\\.)+${LABEL}$`);
/** A zone or domain name: lowercase labels, at least two, no wildcard, no trailing dot. */
export const DnsZoneName = z
  .string()
  .trim()
  .toLowerCase()
  .transform((v) => v.replace(/\.$/, ""))
  .refine((v) => v.length <= 253 && ZONE_RE.test(v), "Use a domain name such as example.com (letters, digits and '-', no wildcard).");

const Secret = z
  .string()
  .min(1)
  .max(4096)
  .regex(/^[\x21-\x7e]+$/, "Printable characters without spaces.");
const Name = z.string().trim().min(1).max(255);

/** An http(s) origin (optionally with a path prefix) without credentials, query or fragment. */
const ApiUrl = z
  .string()
  .trim()
  .max(2048)
  .superRefine((v, ctx) => {
    const fail = (message: string) => ctx.addIssue({ code: "custom", message, input: v });
    if (!URL.canParse(v)) return fail("Use an http(s) URL such as http://ns1.example.com:8081.");
    const u = new URL(v);
    if (u.protocol !== "https:" && u.protocol !== "http:") return fail("The API URL must use http or https.");
    if (u.username || u.password) return fail("Put the key in api_key, never in the URL.");
    if (u.search || u.hash || v.includes("?") || v.includes("#")) return fail("No query or fragment.");
  })
  .transform((v) => v.replace(/\/+$/, ""));

const Host = z
  .string()
  .trim()
  .toLowerCase()
  .max(253)
  .refine((v) => /^[a-z0-9.:-]+$/.test(v) && !v.startsWith("-"), "Use a host name or an IP address.");

export const CloudflareCredentialsBody = requestBody({
  api_token: Secret.meta({ description: "A Cloudflare API token with Zone:Read and DNS:Edit; stored encrypted, shown masked" }),
});
export const PowerDnsCredentialsBody = requestBody({
  api_url: ApiUrl.meta({ description: "Base URL of the PowerDNS webserver, without /api/v1 (http://ns1.example.com:8081)" }),
  api_key: Secret.meta({ description: "The api-key of the PowerDNS configuration; stored encrypted, shown masked" }),
  server_id: z.string().trim().regex(/^[A-Za-z0-9_.-]{1,64}$/, "Letters, digits, '_', '.' and '-'.").default("localhost"),
});
export const Rfc2136CredentialsBody = requestBody({
  server: Host.meta({ description: "Primary server accepting dynamic updates (host name or IP address)" }),
  port: z.number().int().min(1).max(65_535).default(53),
  zone: DnsZoneName.meta({ description: "The zone updates go to" }),
  key_name: z.string().trim().regex(/^[A-Za-z0-9._-]{1,253}$/, "Letters, digits, '_', '.' and '-'."),
  algorithm: z.enum(TSIG_ALGORITHM_NAMES).default("hmac-sha256"),
  secret: z.string().trim().regex(/^[A-Za-z0-9+/]+={0,2}$/, "The TSIG secret in base64.").max(1024).meta({ description: "Stored encrypted; never returned" }),
});

// ---- cloudflare_tunnel (issue 21, w7) ----
/** The tunnel-based Cloudflare type: one provider is one remotely-managed tunnel of an account (docs/dns.md). */
export const CloudflareTunnelCredentialsBody = requestBody({
  api_token: Secret.meta({ description: "A Cloudflare API token with Cloudflare Tunnel:Edit on the account and Zone:Read, DNS:Edit on the zones used; stored encrypted, shown masked" }),
  account_id: z.string().trim().toLowerCase().regex(/^[0-9a-f]{32}$/, "The Cloudflare account id: 32 hexadecimal characters.").meta({ description: "The Cloudflare account the tunnel belongs to" }),
  tunnel_id: z
    .string()
    .trim()
    .toLowerCase()
    .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, "The tunnel's id, a UUID.")
    .meta({ description: "The remotely-managed tunnel (cfd_tunnel) whose ingress rules Capstan maintains" }),
});

const CREDENTIALS = { cloudflare: CloudflareCredentialsBody, powerdns: PowerDnsCredentialsBody, rfc2136: Rfc2136CredentialsBody, cloudflare_tunnel: CloudflareTunnelCredentialsBody } as const;

export type DnsProviderInput =
  | { name: string; type: "cloudflare"; credentials: z.output<typeof CloudflareCredentialsBody> }
  | { name: string; type: "powerdns"; credentials: z.output<typeof PowerDnsCredentialsBody> }
  | { name: string; type: "rfc2136"; credentials: z.output<typeof Rfc2136CredentialsBody> }
  | { name: string; type: "cloudflare_tunnel"; credentials: z.output<typeof CloudflareTunnelCredentialsBody> };

/**
 * One strict body whose `credentials` are checked against the schema of `type` (errors named
 * credentials.<field>): a union of bodies would report a missing or unknown field as "no
 * option matched" instead of naming it.
 */
export const CreateDnsProviderBody = requestBody({
  name: Name,
  type: DnsProviderType,
  credentials: z.record(z.string(), z.unknown()).meta({
    description:
      "cloudflare: {api_token}; powerdns: {api_url, api_key, server_id = localhost}; rfc2136: {server, port = 53, zone, key_name, algorithm = hmac-sha256, secret}; cloudflare_tunnel: {api_token, account_id, tunnel_id}. Unknown fields are refused.",
  }),
})
  .superRefine((b, ctx) => {
    // Runs also when `type` itself was refused (its issue is reported already).
    const schema = Object.hasOwn(CREDENTIALS, b.type) ? CREDENTIALS[b.type] : undefined;
    const r = schema?.safeParse(b.credentials);
    if (r && !r.success) for (const issue of r.error.issues) ctx.addIssue({ ...issue, path: ["credentials", ...issue.path] } as z.core.$ZodRawIssue);
  })
  .transform((b) => {
    // Issues added above do not stop the pipeline: a refused credentials object is never parsed here.
    const r = CREDENTIALS[b.type].safeParse(b.credentials);
    return r.success ? ({ ...b, credentials: r.data } as DnsProviderInput) : z.NEVER;
  });
export type CreateDnsProviderBody = DnsProviderInput;

export const DnsProvider = z
  .object({
    uuid: z.string(),
    name: z.string(),
    type: DnsProviderType,
    credentials: z.record(z.string(), z.union([z.string(), z.number()])).meta({
      description: "The credentials with every secret masked (api_token, api_key: last 4 characters of long values; secret: never)",
    }),
    is_usable: z.boolean().meta({ description: "Result of the last test (false until tested)" }),
    last_tested_at: Timestamp.nullable(),
    last_test_error: z.string().nullable(),
    domain_count: z.number().int(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "DnsProvider" });
export type DnsProvider = z.infer<typeof DnsProvider>;
export const DnsProviderList = listOf(DnsProvider);
export const DnsProviderParams = z.object({ uuid: resourceId("dns_provider", Uuid) });
export const DnsProviderMutation = z.object({ message: z.string(), data: DnsProvider });

/** POST /dns-providers/{uuid}/test: always 200 for a test that ran; `connected` says whether the credentials work. */
export const DnsProviderTestResult = z
  .object({
    message: z.string(),
    connected: z.boolean(),
    error: z.string().optional().meta({ description: "Short reason when connected is false" }),
  })
  .meta({ id: "DnsProviderTestResult" });

export const CreateManagedDomainBody = requestBody({
  name: DnsZoneName.meta({ description: "The domain resources get hostnames under (apps.example.com)" }),
  dns_provider_uuid: Uuid,
  routing_mode: RoutingMode.default("wildcard"),
  zone: DnsZoneName.optional().meta({
    description: "The provider's zone holding the domain's records: the domain itself or a parent of it. Default: the domain (rfc2136: the provider's zone)",
  }),
  server_uuid: Uuid.optional().meta({ description: "The server the domain's wildcard record points at (wildcard and hybrid modes)" }),
});
export type CreateManagedDomainBody = z.output<typeof CreateManagedDomainBody>;

export const DnsDrift = z.object({ name: z.string(), type: z.string(), content: z.string(), reason: z.string() }).meta({ id: "DnsDrift" });
export type DnsDrift = z.infer<typeof DnsDrift>;
export const DnsPlannedRecord = z.object({ name: z.string(), type: z.string(), content: z.string() });

export const SYNC_STATUSES = ["never", "synced", "drifted", "error"] as const;
export const RECONCILE_STATES = ["idle", "pending", "running"] as const;
export const DnsAppliedRecords = z.object({ created: z.array(DnsPlannedRecord), updated: z.array(DnsPlannedRecord), deleted: z.array(DnsPlannedRecord) });

export const ManagedDomain = z
  .object({
    uuid: z.string(),
    name: z.string(),
    zone: z.string(),
    dns_provider_uuid: z.string(),
    routing_mode: RoutingMode,
    server_uuid: z.string().nullable(),
    sync_status: z.enum(SYNC_STATUSES).meta({ description: "never synced; synced; drifted: records Capstan did not create are in the way (see drift); error: the provider failed (see sync_error)" }),
    sync_error: z.string().nullable(),
    drift: z.array(DnsDrift),
    last_synced_at: Timestamp.nullable(),
    // w5/dns: the reconcile is a durable job (POST /domains/{uuid}/sync answers 202).
    reconcile: z
      .object({
        state: z.enum(RECONCILE_STATES),
        requested_at: Timestamp.nullable(),
      })
      .meta({ description: "The domain's reconcile job: idle; pending (due, starts shortly); running (one reconcile per domain at a time)" }),
    last_applied: DnsAppliedRecords.meta({ description: "What the last reconcile that reached the provider changed (empty lists before the first)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "ManagedDomain" });
export type ManagedDomain = z.infer<typeof ManagedDomain>;
export const ManagedDomainList = listOf(ManagedDomain);
export const ManagedDomainParams = z.object({ uuid: resourceId("domain", Uuid) });
export const ManagedDomainMutation = z.object({ message: z.string(), data: ManagedDomain });

/** POST /domains/{uuid}/sync (202): the reconcile job was dispatched, or one is due or running already. */
export const DomainSyncDispatch = z
  .object({
    message: z.string(),
    dispatch: z.enum(["dispatched", "already"]),
    data: ManagedDomain,
  })
  .meta({ id: "DomainSyncDispatch" });
export type DomainSyncDispatch = z.infer<typeof DomainSyncDispatch>;

// ---- dns resources and environment bindings (issue 21, w6) ----

export const DNS_RESOURCE_TYPES = ["application", "service"] as const;
export const DnsResourceType = z.enum(DNS_RESOURCE_TYPES);
export type DnsResourceType = z.infer<typeof DnsResourceType>;
export const DnsResourceParams = z.object({ type: resourceId("dns_resource_type", DnsResourceType), uuid: resourceId("dns_resource", Uuid) });

export const HOSTNAME_SYNC_STATES = ["synced", "pending", "error", "drifted", "unmanaged"] as const;
export const HOSTNAME_BINDINGS = ["override", "environment_binding", "suffix_match"] as const;

export const DnsResourceHostname = z
  .object({
    hostname: z.string(),
    component: z.string().nullable().meta({ description: "service: the component whose domain it is; application: null" }),
    state: z.enum(HOSTNAME_SYNC_STATES).meta({
      description:
        "synced: the last reconcile wrote (or found) the record; pending: a reconcile is due or running, or the change is not reconciled yet; error: the domain's last reconcile failed (see error); drifted: a record Capstan did not create holds the name; unmanaged: no managed domain covers the hostname",
    }),
    domain_uuid: z.string().nullable(),
    domain_name: z.string().nullable(),
    binding: z.enum(HOSTNAME_BINDINGS).nullable().meta({ description: "Why the hostname binds to the domain: override (assign-domain), environment_binding, suffix_match (the longest managed domain covering it)" }),
    record: DnsPlannedRecord.nullable().meta({ description: "The record serving the hostname (the wildcard in wildcard mode); null when unmanaged or when the domain's server is gone" }),
    error: z.string().nullable(),
  })
  .meta({ id: "DnsResourceHostname" });
export type DnsResourceHostname = z.infer<typeof DnsResourceHostname>;

export const DnsResourceState = z
  .object({ resource_type: DnsResourceType, resource_uuid: z.string(), hostnames: z.array(DnsResourceHostname) })
  .meta({ id: "DnsResourceState" });
export type DnsResourceState = z.infer<typeof DnsResourceState>;

export const DnsResyncQuery = z.object({
  dry_run: z
    .enum(["true", "false", "1", "0"])
    .optional()
    .transform((v) => v === "true" || v === "1")
    .meta({ description: "true: dispatch nothing, answer the plan (beyond the spec)" }),
});

export const DnsResyncDispatch = z
  .object({
    message: z.string(),
    domains: z.array(z.object({ uuid: z.string(), name: z.string(), dispatch: z.enum(["dispatched", "already"]) })),
  })
  .meta({ id: "DnsResyncDispatch" });

export const DnsDomainPlan = z.object({
  domain_uuid: z.string(),
  domain_name: z.string(),
  creates: z.array(DnsPlannedRecord),
  updates: z.array(DnsPlannedRecord),
  deletes: z.array(DnsPlannedRecord),
  drift: z.array(DnsDrift),
  error: z.string().nullable(),
});
export const DnsResyncPlan = z
  .object({ message: z.string(), dry_run: z.literal(true), plans: z.array(DnsDomainPlan) })
  .meta({ id: "DnsResyncPlan", description: "The plan of each domain the resource's hostnames fall under, limited to the resource's names and their ownership markers" });

export const AssignDomainBody = requestBody({
  hostname: z.string().trim().toLowerCase().min(1).max(253),
  domain_uuid: Uuid.nullable().meta({ description: "The managed domain the hostname binds to; null removes the pin" }),
});
export type AssignDomainBody = z.output<typeof AssignDomainBody>;

export const ENVIRONMENT_ROLE_RE = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const EnvironmentBindingBody = requestBody({
  environment_id: BodyId.optional().meta({ description: "An environment of the team (its id)" }),
  environment_role: z.string().trim().toLowerCase().max(64).regex(ENVIRONMENT_ROLE_RE, "Lowercase letters, digits and single hyphens (preview, production).").optional().meta({
    description: "Every environment of the team with this name (preview, production...)",
  }),
  priority: z.number().int().min(-1000).max(1000).default(0).meta({ description: "Higher wins when several bindings match a hostname" }),
}).superRefine((b, ctx) => {
  if ((b.environment_id === undefined) === (b.environment_role === undefined)) {
    ctx.addIssue({ code: "custom", path: ["environment_id"], message: "Give environment_id or environment_role (one of them).", input: b });
  }
});
export type EnvironmentBindingBody = z.output<typeof EnvironmentBindingBody>;

export const EnvironmentBinding = z
  .object({
    id: z.number().int(),
    domain_uuid: z.string(),
    environment_id: z.number().int().nullable(),
    environment_role: z.string().nullable(),
    priority: z.number().int(),
    created_at: Timestamp,
  })
  .meta({ id: "EnvironmentBinding" });
export type EnvironmentBinding = z.infer<typeof EnvironmentBinding>;
export const EnvironmentBindingList = z.object({ data: z.array(EnvironmentBinding) });
export const EnvironmentBindingMutation = z.object({ message: z.string(), data: EnvironmentBinding });
export const EnvironmentBindingParams = z.object({ uuid: resourceId("domain", Uuid), bindingId: resourceId("environment_binding", IntId) });
