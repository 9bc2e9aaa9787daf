import { DATABASE_ENGINE_PARAMS } from "../api/databases.js";

/** The password fields of the database create bodies (postgres_password, mysql_root_password, ...). */
const ENGINE_PASSWORD_FIELDS = Object.values(DATABASE_ENGINE_PARAMS).flatMap((p) => (p.rootPassword ? [p.password, p.rootPassword] : [p.password]));

/**
 * Field names whose values never reach a log line, at whatever depth they sit in what is logged:
 * request bodies, job payloads (an S3 target inside a restore's location), error fields.
 */
export const REDACTED_FIELDS: ReadonlySet<string> = new Set([
  "authorization",
  "cookie",
  "set-cookie",
  "password",
  "root_password",
  "passphrase",
  "encryption_passphrase",
  "secret",
  "secret_key",
  "access_key",
  "token",
  "agent_token",
  "private_key",
  "webhook_secret",
  "credentials",
  // secret values a job payload carries only for masking them (app.logs)
  "secrets",
  // connection URLs of databases carry their password
  "internal_db_url",
  "external_db_url",
  ...ENGINE_PASSWORD_FIELDS,
]);

/**
 * Names that say they hold a secret, whatever else they say (CAPSTAN_AGENT_TOKEN, x-registry-auth
 * token, s3_secret_key...): a new field is redacted without being listed.
 */
const SECRET_NAME = /token|password|passphrase|secret|credential|authorization|private_key|access_key/i;

/** Whether the value of a field of this name is never logged. */
export const isSecretField = (key: string): boolean => REDACTED_FIELDS.has(key) || SECRET_NAME.test(key);

const CENSOR = "[redacted]";
/**
 * Deeper than any body or payload the platform logs (pino itself prints objects 5 levels deep);
 * objects below it are not looked into and are logged as a placeholder, which ends cycles too.
 */
const MAX_DEPTH = 10;

/**
 * A copy of `value` with the values of secret fields (isSecretField) replaced, copying only the objects on the
 * way to a replaced field (the caller's objects are never changed; the usual line copies nothing).
 * The control plane runs it as pino's `formatters.log` (matching field names at any depth costs
 * about a microsecond a line, where the same coverage as pino `redact` wildcard paths, one per
 * field and depth, cost ~100 µs on every request's log line); the agent on each record it writes.
 */
export function redactSecrets<T>(value: T, depth = 0): T {
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_DEPTH) return "[too deep]" as T;
  if (Array.isArray(value)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const r = redactSecrets(value[i], depth + 1);
      if (r !== value[i]) (out ??= value.slice())[i] = r;
    }
    return (out ?? value) as T;
  }
  // Buffers and typed arrays hold bytes, not fields; Dates and the like log as their toJSON.
  if (ArrayBuffer.isView(value) || typeof (value as { toJSON?: unknown }).toJSON === "function") return value;
  const source = value as Record<string, unknown>;
  let out: Record<string, unknown> | null = null;
  for (const key of Object.keys(source)) {
    const v = source[key];
    const r = isSecretField(key) && v !== undefined && v !== null ? CENSOR : redactSecrets(v, depth + 1);
    if (r !== v) (out ??= shallowCopy(source))[key] = r;
  }
  return (out ?? value) as T;
}

/** Errors stay errors (same prototype, message and stack), so pino's err serializer still applies. */
function shallowCopy(source: Record<string, unknown>): Record<string, unknown> {
  if (source instanceof Error) {
    return Object.assign(Object.create(Object.getPrototypeOf(source) as object) as Record<string, unknown>, source, { message: source.message, stack: source.stack });
  }
  return { ...source };
}
