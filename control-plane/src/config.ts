import { z } from "zod";
import { resolve } from "node:path";

const Bool = z
  .enum(["true", "false", "1", "0", "yes", "no"])
  .transform((v) => v === "true" || v === "1" || v === "yes");

/** Every PLATFORM_* setting with its default; documented in README and docs/configuration.md. */
const EnvSchema = z.object({
  PLATFORM_DATA_DIR: z.string().min(1).default("./data"),
  PLATFORM_PORT: z.coerce.number().int().min(0).max(65535).default(8000),
  PLATFORM_HOST: z.string().min(1).default("0.0.0.0"),
  DATABASE_URL: z
    .string()
    .regex(/^(postgres(ql)?:\/\/|file:)/, "must start with postgresql://, postgres:// or file:")
    .optional(),
  PLATFORM_SECRET_KEY: z
    .string()
    .regex(/^[A-Za-z0-9+/]{43}=$/, "must be 32 random bytes in base64 (openssl rand -base64 32)")
    .optional(),
  PLATFORM_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(60),
  PLATFORM_MAX_BODY_BYTES: z.coerce.number().int().min(1024).max(100 * 1024 * 1024).default(1024 * 1024),
  PLATFORM_LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  PLATFORM_SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
  PLATFORM_TRUST_PROXY: Bool.default(false),
  PLATFORM_ROOT_EMAIL: z.email().default("root@localhost"),
  PLATFORM_PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
  PLATFORM_AGENT_IMAGE: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._/:@-]{0,254}$/, "must be an image reference like capstan/agent:1.0")
    .default("capstan/agent:latest"),
});

export type DatabaseConfig =
  | { kind: "sqlite"; file: string }
  | { kind: "postgresql"; url: string };

export interface Config {
  dataDir: string;
  port: number;
  host: string;
  database: DatabaseConfig;
  secretKey: Buffer | null;
  rateLimitPerMinute: number;
  maxBodyBytes: number;
  logLevel: z.infer<typeof EnvSchema>["PLATFORM_LOG_LEVEL"];
  shutdownTimeoutMs: number;
  trustProxy: boolean;
  rootEmail: string;
  /** Base URL agents and the join command use to reach this control plane. */
  publicUrl: string;
  agentImage: string;
}

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  const dataDir = resolve(e.PLATFORM_DATA_DIR);
  let database: DatabaseConfig;
  if (e.DATABASE_URL?.startsWith("file:")) {
    database = { kind: "sqlite", file: resolve(e.DATABASE_URL.slice("file:".length)) };
  } else if (e.DATABASE_URL) {
    database = { kind: "postgresql", url: e.DATABASE_URL };
  } else {
    database = { kind: "sqlite", file: resolve(dataDir, "capstan.db") };
  }
  return {
    dataDir,
    port: e.PLATFORM_PORT,
    host: e.PLATFORM_HOST,
    database,
    secretKey: e.PLATFORM_SECRET_KEY ? Buffer.from(e.PLATFORM_SECRET_KEY, "base64") : null,
    rateLimitPerMinute: e.PLATFORM_RATE_LIMIT_PER_MINUTE,
    maxBodyBytes: e.PLATFORM_MAX_BODY_BYTES,
    logLevel: e.PLATFORM_LOG_LEVEL,
    shutdownTimeoutMs: e.PLATFORM_SHUTDOWN_TIMEOUT_MS,
    trustProxy: e.PLATFORM_TRUST_PROXY,
    rootEmail: e.PLATFORM_ROOT_EMAIL,
    publicUrl: (e.PLATFORM_PUBLIC_URL ?? `http://127.0.0.1:${e.PLATFORM_PORT}`).replace(/\/+$/, ""),
    agentImage: e.PLATFORM_AGENT_IMAGE,
  };
}
