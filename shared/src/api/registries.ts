import { z } from "zod";
import { BodyId, IntId, Timestamp, listOf, requestBody, resourceId } from "./common.js";

/**
 * Registries (/api/v1/registries, spec 4.9, paid feature REGISTRY_MANAGEMENT): a team's
 * container registry logins. Credentials are write-only: no response carries a password, a
 * secret access key or a principal secret (spec 2: "credentials are masked").
 */

export const REGISTRY_TYPES = ["containerhub", "repohost_a", "repohost_b", "cloud_a", "registry_q", "cloud_b", "custom"] as const;
export const RegistryType = z.enum(REGISTRY_TYPES).meta({
  description:
    "containerhub (public hub registry), repohost_a / repohost_b (registries of code-hosting platforms), cloud_a (a cloud vendor's token-based registry), registry_q (a hosted registry), cloud_b (a second cloud vendor's registry), custom (any V2 registry)",
});
export type RegistryType = z.infer<typeof RegistryType>;

/** The credential fields each type takes (spec 2, "Credentials object by type"); all of them are required. */
export const REGISTRY_CREDENTIAL_FIELDS = {
  containerhub: ["username", "password"],
  repohost_a: ["username", "password"],
  repohost_b: ["username", "password"],
  registry_q: ["username", "password"],
  custom: ["username", "password"],
  cloud_b: ["username", "password"],
  cloud_a: ["cloud_access_key_id", "cloud_secret_access_key", "cloud_region"],
} as const satisfies Record<RegistryType, readonly string[]>;

/** What a field is called in a type's error messages (cloud_b's username is a principal id). */
const FIELD_LABEL: Record<RegistryType, Partial<Record<string, string>>> = {
  containerhub: {},
  repohost_a: {},
  repohost_b: {},
  registry_q: {},
  custom: {},
  cloud_b: { username: "the principal id", password: "the principal secret" },
  cloud_a: {},
};

const Printable = (what: string, max: number) =>
  z
    .string()
    .min(1, `${what} must not be empty.`)
    .max(max, `${what} has at most ${max} characters.`)
    .regex(/^[\x21-\x7e]+$/, `${what}: printable ASCII characters without spaces.`);

/**
 * The login name: what `docker login -u` takes. Registries accept e-mail addresses, robot
 * accounts (`robot$project+ci`), principal ids (UUIDs) and `AWS`, all printable ASCII.
 */
export const RegistryUsername = Printable("The username", 255).refine((v) => !v.includes(":"), "The username cannot contain ':' (a login sends user:password).");
/** A password, access token or principal secret: anything without control characters (a login reads it from standard input, up to the line end). */
export const RegistryPassword = z
  .string()
  .min(1, "The password must not be empty.")
  .max(4096, "The password has at most 4096 characters.")
  .refine((v) => !/[\u0000-\u001f\u007f]/.test(v), "No control characters (no line breaks) in the password.");
/** Access key ids of the vendor: upper-case letters and digits (AKIA..., ASIA...). */
export const CloudAccessKeyId = z
  .string()
  .regex(/^[A-Z0-9]{16,128}$/, "An access key id has 16 to 128 upper-case letters and digits (e.g. AKIAIOSFODNN7EXAMPLE).");
export const CloudSecretAccessKey = Printable("The secret access key", 256);
/** The vendor's region names: us-east-1, eu-central-1, ap-southeast-2, us-gov-west-1. */
export const CloudRegion = z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d{1,2}$/, "A region such as us-east-1 or eu-central-1.");

/**
 * The credentials object of a create or update. One object for every type, each field optional
 * here: which fields the registry's type takes (and requires) is checked against the type
 * (registryCredentialIssues), so a 422 names `credentials.<field>` with what is wrong.
 */
export const RegistryCredentialsInput = requestBody({
  username: RegistryUsername.optional().meta({ description: "containerhub, repohost_a, repohost_b, registry_q, custom: the login name; cloud_b: the principal id" }),
  password: RegistryPassword.optional().meta({ description: "The password or access token (cloud_b: the principal secret). Stored encrypted; never returned." }),
  cloud_access_key_id: CloudAccessKeyId.optional().meta({ description: "cloud_a only. Stored encrypted; shown masked as username." }),
  cloud_secret_access_key: CloudSecretAccessKey.optional().meta({ description: "cloud_a only. Stored encrypted; never returned." }),
  cloud_region: CloudRegion.optional().meta({ description: "cloud_a only: the region of the registry." }),
}).meta({ id: "RegistryCredentialsInput" });
export type RegistryCredentialsInput = z.output<typeof RegistryCredentialsInput>;

/** Credentials checked against a type: the stored (sealed) form. */
export type RegistryCredentials =
  | { username: string; password: string }
  | { cloud_access_key_id: string; cloud_secret_access_key: string; cloud_region: string };

/**
 * What is wrong with `credentials` for a registry of `type`: field errors keyed by the REST
 * field names (credentials.password), empty when they fit. A missing field of the type and a
 * field of another type are both named.
 */
export function registryCredentialIssues(type: RegistryType, credentials: RegistryCredentialsInput): Record<string, string[]> {
  const wanted = REGISTRY_CREDENTIAL_FIELDS[type] as readonly string[];
  const errors: Record<string, string[]> = {};
  for (const field of wanted) {
    if ((credentials as Record<string, unknown>)[field] === undefined) {
      errors[`credentials.${field}`] = [`Required for ${type} registries${FIELD_LABEL[type][field] ? ` (${FIELD_LABEL[type][field]})` : ""}.`];
    }
  }
  for (const [field, value] of Object.entries(credentials)) {
    if (value !== undefined && !wanted.includes(field)) {
      errors[`credentials.${field}`] = [`Not a credential of ${type} registries; they take ${wanted.join(", ")}.`];
    }
  }
  return errors;
}

/** The credentials of a type, once registryCredentialIssues found nothing wrong. */
export function registryCredentials(type: RegistryType, c: RegistryCredentialsInput): RegistryCredentials {
  if (type === "cloud_a") return { cloud_access_key_id: c.cloud_access_key_id!, cloud_secret_access_key: c.cloud_secret_access_key!, cloud_region: c.cloud_region! };
  return { username: c.username!, password: c.password! };
}

/**
 * The registry's address: `host[:port]` (https is meant) or an http(s) origin, without
 * credentials, path, query or fragment (ghcr.io, https://registry.example.com:5000,
 * http://10.0.0.5:5000). Stored as an origin with its scheme: the host[:port] part is what
 * image names start with. Whether the address may be a loopback/link-local/metadata one is the
 * control plane's decision (PLATFORM_ALLOW_PRIVATE_ENDPOINTS), not this schema's.
 */
export const RegistryUrl = z
  .string()
  .trim()
  .min(1)
  .max(2048)
  .superRefine((v, ctx) => {
    const fail = (message: string) => ctx.addIssue({ code: "custom", message, input: v });
    const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(v) ? v : `https://${v}`;
    if (!URL.canParse(withScheme)) return fail("Use a registry host (ghcr.io, registry.example.com:5000) or an http(s) URL.");
    const u = new URL(withScheme);
    if (u.protocol !== "https:" && u.protocol !== "http:") return fail("The registry URL must use http or https.");
    if (u.username || u.password || v.includes("@")) return fail("Put the credentials in credentials, never in the URL.");
    if ((u.pathname !== "/" && u.pathname !== "") || u.search || u.hash || v.includes("?") || v.includes("#")) {
      return fail("The registry URL is a host or an origin only: no path, query or fragment.");
    }
    if (!u.hostname) return fail("The registry URL needs a host.");
  })
  .transform((v) => {
    const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(v) ? v : `https://${v}`;
    return URL.canParse(withScheme) ? new URL(withScheme).origin : v;
  })
  .meta({ description: "The registry host (ghcr.io) or origin (http://10.0.0.5:5000); https when no scheme is given" });

const Name = z.string().trim().min(1).max(255);

export const CreateRegistryBody = requestBody({
  name: Name,
  type: RegistryType,
  url: RegistryUrl,
  credentials: RegistryCredentialsInput,
  is_default: z.boolean().default(false).meta({ description: "Used for images that name no registry host; at most one per team (setting it moves it here)" }),
}).superRefine((b, ctx) => {
  for (const [path, messages] of Object.entries(registryCredentialIssues(b.type, b.credentials))) {
    for (const message of messages) ctx.addIssue({ code: "custom", message, path: path.split(".") });
  }
});
export type CreateRegistryBody = z.output<typeof CreateRegistryBody>;

/**
 * PATCH: only the fields given change. `credentials` replaces the stored ones whole and is
 * checked against the registry's type (which does not change). `url` and `is_default` go
 * beyond the spec's list (docs/decisions.md).
 */
export const UpdateRegistryBody = requestBody({
  name: Name.optional(),
  url: RegistryUrl.optional(),
  credentials: RegistryCredentialsInput.optional(),
  is_default: z.boolean().optional().meta({ description: "true makes it the team's default (the previous default stops being one); false: no default" }),
  server_ids: z
    .array(z.union([BodyId, z.string().min(1).max(64)]))
    .max(1000)
    .refine((ids) => new Set(ids.map(String)).size === ids.length, "A server is named twice.")
    .optional()
    .meta({
      description:
        "The servers the registry is assigned to, replacing the current set: integer server ids (as the registry detail shows them) or server uuids. A server of another team is a 404 for the whole request. Call sync afterwards.",
    }),
}).refine((b) => Object.values(b).some((v) => v !== undefined), { message: "Provide at least one field to change.", path: ["body"] });
export type UpdateRegistryBody = z.output<typeof UpdateRegistryBody>;

export const Registry = z
  .object({
    id: z.number().int(),
    name: z.string(),
    type: RegistryType,
    url: z.string(),
    username: z.string().meta({ description: "The login name (cloud_b: the principal id); cloud_a: the access key id, masked" }),
    is_default: z.boolean(),
    server_count: z.number().int().meta({ description: "Servers the registry is assigned to" }),
    last_synced_at: Timestamp.nullable().meta({ description: "When a sync last wrote the login on its servers" }),
    cloud_region: z.string().nullable().meta({ description: "cloud_a: the region of the registry; null for other types" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "Registry" });
export type Registry = z.infer<typeof Registry>;

/** The detail: the registry and its assigned servers with the state of the login on each. */
export const RegistryDetail = Registry.extend({
  servers: z.array(
    z
      .object({
        id: z.number().int(),
        uuid: z.string(),
        name: z.string(),
        sync_status: z.enum(["pending", "syncing", "synced", "failed"]).meta({ description: "pending: assigned, not synced since; syncing: a login job is under way" }),
        synced_at: Timestamp.nullable().meta({ description: "When the last good login was written" }),
        error: z.string().nullable().meta({ description: "Why the last sync failed" }),
        fingerprint: z.string().nullable().meta({ description: "Which credentials the last good login wrote (not derived from the secret)" }),
        drift: z.boolean().meta({
          description: "The server's stored login no longer matches the last good sync (changed or removed on the server); the agent's last facts tell. Sync rewrites it.",
        }),
      })
      .meta({ id: "RegistryServer" }),
  ),
}).meta({ id: "RegistryDetail" });
export type RegistryDetail = z.infer<typeof RegistryDetail>;

export const RegistrySyncResult = z.object({ message: z.string(), count: z.number().int().meta({ description: "Servers a login job was dispatched for" }) });

export const RegistryList = listOf(Registry);
export const RegistryParams = z.object({ id: resourceId("registry", IntId) });
export const CreatedRegistry = z
  .object({ message: z.string(), data: z.object({ id: z.number().int(), name: z.string(), type: RegistryType }) })
  .meta({ id: "CreatedRegistry" });
export const RegistryMutation = z.object({ message: z.string(), data: RegistryDetail });

/** POST /registries/{id}/test: always 200 (spec 7: a failed test is not an HTTP error). */
export const RegistryTestResult = z
  .object({
    message: z.string(),
    authenticated: z.boolean(),
    error: z.string().optional().meta({ description: "The registry's reason (or why it could not be reached) when authenticated is false" }),
  })
  .meta({ id: "RegistryTestResult" });
export type RegistryTestResult = z.infer<typeof RegistryTestResult>;
