import { isAbsolute, resolve } from "node:path";
import { z } from "zod";

/** Agent tokens: printable, no whitespace or shell/env-file metacharacters (install.sh checks the same). */
export const AGENT_TOKEN_PATTERN = /^[A-Za-z0-9._~+/=-]{16,200}$/;

export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** An empty variable (e.g. `FOO=` in an env file) means "not set". */
const optional = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (v === "" ? undefined : v), schema);

const EnvSchema = z.object({
  CAPSTAN_URL: z
    .string({ error: "is required (the control plane's base URL, e.g. https://capstan.example.com)" })
    .trim()
    .pipe(
      z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" }).refine((u) => {
        if (!URL.canParse(u)) return true; // reported by z.url above
        const url = new URL(u);
        return url.search === "" && url.hash === "" && url.username === "" && url.password === "";
      }, "must not carry credentials, a query or a fragment"),
    ),
  CAPSTAN_AGENT_TOKEN: z
    .string({ error: "is required (the agent token shown when the server was added)" })
    .regex(AGENT_TOKEN_PATTERN, "must be 16-200 characters of A-Z a-z 0-9 . _ ~ + / = -"),
  CAPSTAN_AGENT_STATE_DIR: optional(z.string().default("/var/lib/capstan-agent")),
  DOCKER_SOCKET: optional(
    z
      .string()
      .transform((s) => (s.startsWith("unix://") ? s.slice("unix://".length) : s))
      .refine(isAbsolute, "must be an absolute path to the Docker Engine's unix socket (or unix:///path)")
      .optional(),
  ),
  /** Docker's own variable, read when DOCKER_SOCKET is not set: only unix:// engines (the agent speaks to a local socket). */
  DOCKER_HOST: optional(
    z
      .string()
      .refine((s) => s.startsWith("unix://") && isAbsolute(s.slice("unix://".length)), "must be unix:///path/to/docker.sock (the agent drives a local engine's socket; set DOCKER_SOCKET to override)")
      .transform((s) => s.slice("unix://".length))
      .optional(),
  ),
  CAPSTAN_AGENT_LOG_LEVEL: optional(z.enum(LOG_LEVELS).default("info")),
  CAPSTAN_AGENT_LABELS: optional(
    z
      .string()
      .default("")
      .transform((v) => v.split(",").map((p) => p.trim()).filter(Boolean))
      .pipe(
        z.array(
          z
            .string()
            .regex(/^[a-z0-9][a-z0-9._-]{0,127}=[A-Za-z0-9._:/@+-]{0,256}$/, "each entry must be key=value (lowercase key, simple value)")
            .refine((kv) => !kv.startsWith("capstan.managed=") && !kv.startsWith("capstan.resource.") && !kv.startsWith("capstan.deployment"), "must not override the platform's own labels"),
        ),
      ),
  ),
  // resource restores (w7/restore): the image of resource.restore's helper container (default: the agent's own container's)
  CAPSTAN_AGENT_HELPER_IMAGE: optional(
    z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,254}$/, "must be an image reference (name[:tag] or id) present on this server")
      .optional(),
  ),
});

export interface AgentConfig {
  /** Control plane base URL without a trailing slash. */
  url: string;
  token: string;
  stateDir: string;
  dockerSocket: string;
  logLevel: LogLevel;
  /** Extra labels on everything the agent creates (e.g. owner=ops, or capstan.test=1 in tests). */
  extraLabels: Record<string, string>;
  /** (resource restores, w7/restore) resource.restore's helper image; absent: the agent's own container's image */
  helperImage?: string;
}

export class ConfigError extends Error {}

/** Parses the agent's environment; throws ConfigError listing every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  // DOCKER_SOCKET wins over DOCKER_HOST: then a DOCKER_HOST meant for a docker CLI is not checked.
  const parsed = EnvSchema.safeParse(env.DOCKER_SOCKET ? { ...env, DOCKER_HOST: undefined } : env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Invalid capstan-agent configuration:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  return {
    url: e.CAPSTAN_URL.replace(/\/+$/, ""),
    token: e.CAPSTAN_AGENT_TOKEN,
    stateDir: resolve(e.CAPSTAN_AGENT_STATE_DIR),
    dockerSocket: e.DOCKER_SOCKET ?? e.DOCKER_HOST ?? "/var/run/docker.sock",
    logLevel: e.CAPSTAN_AGENT_LOG_LEVEL,
    extraLabels: Object.fromEntries(e.CAPSTAN_AGENT_LABELS.map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)])),
    ...(e.CAPSTAN_AGENT_HELPER_IMAGE ? { helperImage: e.CAPSTAN_AGENT_HELPER_IMAGE } : {}),
  };
}
