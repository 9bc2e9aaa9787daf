import { z } from "zod";
import { isIP } from "node:net";
import { resolve } from "node:path";
import { type BaseImages, FEATURES, type Feature, ImageOverrides, ImageRef, isImageRef, parseFeatureList } from "@capstan/shared";

/** PLATFORM_NETWORK_ISOLATION_MODE (spec section 1, "Network management behavior"). */
export const NETWORK_ISOLATION_MODES = ["none", "environment", "strict"] as const;
export type NetworkIsolationMode = (typeof NETWORK_ISOLATION_MODES)[number];

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
  PLATFORM_ALLOW_PRIVATE_ENDPOINTS: Bool.default(false),
  /** cloud_a registries' token API instead of the vendor's regional endpoint (a proxy, or tests' fake); http(s) origin. */
  PLATFORM_REGISTRY_CLOUD_A_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  PLATFORM_ROOT_EMAIL: z.email().default("root@localhost"),
  PLATFORM_PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
  PLATFORM_AGENT_IMAGE: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._/:@-]{0,254}$/, "must be an image reference like capstan/agent:1.0")
    .default("capstan/agent:latest"),
  // Deployments (docs/deployments.md) and the per-server reverse proxy.
  PLATFORM_PROXY_IMAGE: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._/:@-]{0,254}$/, "must be an image reference like capstan/proxy:1.0")
    .default("capstan/proxy:latest"),
  PLATFORM_PROXY_NAME: z
    .string()
    .regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/, "must be a container name like capstan-proxy")
    .default("capstan-proxy"),
  PLATFORM_PROXY_HTTP_PORT: z.coerce.number().int().min(1).max(65535).default(80),
  PLATFORM_PROXY_HTTPS_PORT: z.coerce.number().int().min(1).max(65535).default(443),
  PLATFORM_DEPLOY_TIMEOUT_S: z.coerce.number().int().min(1).max(24 * 3600).default(1800),
  PLATFORM_BUILD_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  PLATFORM_DEPLOY_QUEUE_LIMIT: z.coerce.number().int().min(1).max(10_000).default(50),
  // Build servers push images here; the application's server pulls them (docs/deployments.md).
  PLATFORM_BUILD_REGISTRY: z
    .string()
    .trim()
    .refine(isBuildRegistry, "must be a registry host with an optional port and path, like registry.example.com:5000/capstan")
    .optional(),
  PLATFORM_BUILD_REGISTRY_USERNAME: z.string().min(1).max(255).regex(/^[^\s:]+$/, "must not contain spaces or ':'").optional(),
  PLATFORM_BUILD_REGISTRY_PASSWORD: z.string().min(1).max(4096).regex(/^[^\r\n]+$/, "must be one line").optional(),
  // Base images of the source builders builder_a..builder_d, by role (docs/builders.md).
  PLATFORM_BUILDER_IMAGE_NODE: ImageRef.default("node:20-bookworm-slim"),
  PLATFORM_BUILDER_IMAGE_PYTHON: ImageRef.default("python:3.11-slim"),
  PLATFORM_BUILDER_IMAGE_GO: ImageRef.default("golang:1.22-bookworm"),
  PLATFORM_BUILDER_IMAGE_STATIC: ImageRef.default("caddy:2-alpine"),
  PLATFORM_BUILDER_IMAGE_RUNTIME: ImageRef.default("debian:bookworm-slim"),
  // Network management and proxy isolation (docs/networks.md).
  PLATFORM_NETWORK_MANAGEMENT: Bool.default(false),
  PLATFORM_NETWORK_ISOLATION_MODE: z.enum(NETWORK_ISOLATION_MODES, { error: "must be none, environment or strict" }).default("environment"),
  // No default here: strict mode implies it when it is not set, and refuses an explicit false.
  PLATFORM_PROXY_ISOLATION: Bool.optional(),
  PLATFORM_OVERLAY_ENCRYPTION: Bool.default(false),
  PLATFORM_MAX_NETWORKS: z.coerce.number({ error: "must be a whole number" }).int("must be a whole number").min(1, "must be at least 1").max(100_000, "must be at most 100000").default(200),
  // Paid features a new team gets (docs/features.md); the root team gets every one.
  PLATFORM_DEFAULT_TEAM_FEATURES: z
    .string()
    .default("")
    .transform((v, ctx) => {
      const r = parseFeatureList(v);
      if ("features" in r) return r.features;
      ctx.addIssue({ code: "custom", message: `unknown feature(s) ${r.unknown.join(", ")}; use a comma-separated list of ${FEATURES.join(", ")}` });
      return z.NEVER;
    }),
  // Upstream image -> local image for template services (tests, air-gapped installs; docs/templates.md).
  PLATFORM_TEMPLATE_IMAGE_OVERRIDES: z
    .string()
    .default("{}")
    .transform((v, ctx) => {
      let json: unknown;
      try {
        json = JSON.parse(v.trim() === "" ? "{}" : v);
      } catch {
        ctx.addIssue({ code: "custom", message: 'must be a JSON object such as {"postgres:16-alpine":"registry.local/postgres:16-alpine"}' });
        return z.NEVER;
      }
      const r = ImageOverrides.safeParse(json);
      if (r.success) return r.data;
      const details = r.error.issues.filter((i) => i.code === "custom").map((i) => i.message).slice(0, 3);
      ctx.addIssue({ code: "custom", message: `must be a JSON object of image reference to image reference${details.length ? ` (${details.join("; ")})` : ""}` });
      return z.NEVER;
    }),
  // DNS (issue 21): Cloudflare's API base; tests and egress proxies point it elsewhere (docs/dns.md).
  PLATFORM_CLOUDFLARE_API_URL: z.url({ protocol: /^https?$/ }).default("https://api.cloudflare.com/client/v4"),
  // Generated domains of service applications (docs/services.md "Generated domains").
  PLATFORM_SERVICE_WILDCARD_DOMAIN: z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === "") return null;
      const r = parseWildcardDomain(v);
      if ("host" in r) return r;
      ctx.addIssue({ code: "custom", message: r.error });
      return z.NEVER;
    }),
});

/** The instance-wide wildcard domain of generated service domains (PLATFORM_SERVICE_WILDCARD_DOMAIN): its host and scheme. */
export interface WildcardDomain {
  host: string;
  https: boolean;
}

/**
 * PLATFORM_SERVICE_WILDCARD_DOMAIN as written: `apps.example.com` (https), `https://apps.example.com`,
 * `http://apps.example.com`, or with a leading `*.`. A message for anything else.
 */
export function parseWildcardDomain(value: string): WildcardDomain | { error: string } {
  const m = /^(?:(https?):\/\/)?(?:\*\.)?([^/:]+?)\.?\/?$/i.exec(value.trim());
  const host = m?.[2]?.toLowerCase() ?? "";
  const label = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
  const labels = host.split(".");
  if (!m || host.length > 200 || labels.length < 2 || !labels.every((l) => label.test(l)) || isIP(host)) {
    return { error: "must be a domain name such as apps.example.com (optionally with http:// or https://, no port or path) whose *.<domain> record points at your servers" };
  }
  return { host, https: (m[1] ?? "https").toLowerCase() === "https" };
}


/**
 * A registry location images can be pushed under: `host[:port][/path]`, where the host names
 * a registry (has a dot or a port, or is localhost; otherwise the engine would read it as a
 * Docker Hub namespace), and `<it>/<uuid>:<uuid>` is an image reference.
 */
function isBuildRegistry(v: string): boolean {
  const host = v.split("/")[0]!;
  if (!(host.includes(".") || host.includes(":") || host === "localhost")) return false;
  const sample = "0a1b2c3d-0000-4000-8000-000000000000";
  return isImageRef(`${v}/${sample}:${sample}`) && !v.endsWith("/");
}

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
  /** Calls to user-chosen endpoints (git app APIs) may reach loopback, link-local and metadata addresses (lib/outbound.ts). */
  allowPrivateEndpoints: boolean;
  /** PLATFORM_REGISTRY_CLOUD_A_ENDPOINT (null: the vendor's regional endpoint). */
  registryCloudAEndpoint: string | null;
  maxBodyBytes: number;
  logLevel: z.infer<typeof EnvSchema>["PLATFORM_LOG_LEVEL"];
  shutdownTimeoutMs: number;
  trustProxy: boolean;
  rootEmail: string;
  /** Base URL agents and the join command use to reach this control plane. */
  publicUrl: string;
  agentImage: string;
  /** The reverse proxy every server runs (image and host ports). */
  proxy: { name: string; image: string; httpPort: number; httpsPort: number };
  /** Deployment scheduling: deadline of a started deployment, builds per server, queued per server. */
  deploy: { timeoutMs: number; buildConcurrency: number; queueLimit: number };
  /** Base image of each builder role, sent with every source build (DeployPayload.build.base_images). */
  builderImages: BaseImages;
  /** Where build servers push the images they build; null: build servers are not used. */
  buildRegistry: BuildRegistryConfig | null;
  network: NetworkConfig;
  /** Paid features every new team gets (PLATFORM_DEFAULT_TEAM_FEATURES). */
  defaultTeamFeatures: Feature[];
  /** Images template services run instead of their upstream ones (PLATFORM_TEMPLATE_IMAGE_OVERRIDES). */
  templateImageOverrides: ImageOverrides;
  /** DNS (issue 21): base URL of Cloudflare's v4 API (PLATFORM_CLOUDFLARE_API_URL). */
  cloudflareApiUrl: string;
  /** Base of service applications' generated domains before sslip.io (PLATFORM_SERVICE_WILDCARD_DOMAIN); null: unset. */
  serviceWildcardDomain: WildcardDomain | null;
}

/** Network management as the instance runs it: the settings after start-up validation (docs/networks.md). */
export interface NetworkConfig {
  /** Off: every resource of a server is on its destination network (one bridge), as before. */
  management: boolean;
  isolation: NetworkIsolationMode;
  /** The dedicated proxy network is used: PLATFORM_PROXY_ISOLATION, or implied by strict mode. */
  proxyIsolation: boolean;
  /** Overlay networks the platform creates are encrypted between nodes. */
  overlayEncryption: boolean;
  /** Networks per server the platform will create up to (spec section 8). */
  maxNetworks: number;
}

export interface BuildRegistryConfig {
  /** `host[:port][/path]`: images are `<location>/<app uuid>:<deployment uuid>`. */
  location: string;
  auth: { username: string; password: string } | null;
}

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  if (!!e.PLATFORM_BUILD_REGISTRY_USERNAME !== !!e.PLATFORM_BUILD_REGISTRY_PASSWORD) {
    throw new ConfigError("Invalid configuration:\n  PLATFORM_BUILD_REGISTRY_USERNAME and PLATFORM_BUILD_REGISTRY_PASSWORD go together: set both or neither");
  }
  if (e.PLATFORM_BUILD_REGISTRY_USERNAME && !e.PLATFORM_BUILD_REGISTRY) {
    throw new ConfigError("Invalid configuration:\n  PLATFORM_BUILD_REGISTRY_USERNAME needs PLATFORM_BUILD_REGISTRY");
  }
  const network = networkConfig(e);
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
    allowPrivateEndpoints: e.PLATFORM_ALLOW_PRIVATE_ENDPOINTS,
    registryCloudAEndpoint: e.PLATFORM_REGISTRY_CLOUD_A_ENDPOINT ?? null,
    rootEmail: e.PLATFORM_ROOT_EMAIL,
    publicUrl: (e.PLATFORM_PUBLIC_URL ?? `http://127.0.0.1:${e.PLATFORM_PORT}`).replace(/\/+$/, ""),
    agentImage: e.PLATFORM_AGENT_IMAGE,
    proxy: { name: e.PLATFORM_PROXY_NAME, image: e.PLATFORM_PROXY_IMAGE, httpPort: e.PLATFORM_PROXY_HTTP_PORT, httpsPort: e.PLATFORM_PROXY_HTTPS_PORT },
    deploy: {
      timeoutMs: e.PLATFORM_DEPLOY_TIMEOUT_S * 1000,
      buildConcurrency: e.PLATFORM_BUILD_CONCURRENCY,
      queueLimit: e.PLATFORM_DEPLOY_QUEUE_LIMIT,
    },
    buildRegistry: e.PLATFORM_BUILD_REGISTRY
      ? {
          location: e.PLATFORM_BUILD_REGISTRY,
          auth: e.PLATFORM_BUILD_REGISTRY_USERNAME ? { username: e.PLATFORM_BUILD_REGISTRY_USERNAME, password: e.PLATFORM_BUILD_REGISTRY_PASSWORD! } : null,
        }
      : null,
    network,
    defaultTeamFeatures: e.PLATFORM_DEFAULT_TEAM_FEATURES,
    templateImageOverrides: e.PLATFORM_TEMPLATE_IMAGE_OVERRIDES,
    cloudflareApiUrl: e.PLATFORM_CLOUDFLARE_API_URL.replace(/\/+$/, ""),
    serviceWildcardDomain: e.PLATFORM_SERVICE_WILDCARD_DOMAIN,
    builderImages: {
      node: e.PLATFORM_BUILDER_IMAGE_NODE,
      python: e.PLATFORM_BUILDER_IMAGE_PYTHON,
      go: e.PLATFORM_BUILDER_IMAGE_GO,
      static: e.PLATFORM_BUILDER_IMAGE_STATIC,
      runtime: e.PLATFORM_BUILDER_IMAGE_RUNTIME,
    },
  };
}

/**
 * The network settings, checked together. Settings that could only be meant as "isolate" but
 * would do nothing, or contradict each other, stop the start with the reason rather than run
 * with less isolation than the operator asked for:
 * - strict mode with PLATFORM_PROXY_ISOLATION=false (strict is proxy isolation enforced);
 * - strict mode, PLATFORM_PROXY_ISOLATION=true or PLATFORM_OVERLAY_ENCRYPTION=true without
 *   PLATFORM_NETWORK_MANAGEMENT=true (without management the platform creates no network, so
 *   there is no overlay to encrypt).
 * Strict mode with PLATFORM_PROXY_ISOLATION unset turns proxy isolation on.
 */
function networkConfig(e: z.infer<typeof EnvSchema>): NetworkConfig {
  const problems: string[] = [];
  const strict = e.PLATFORM_NETWORK_ISOLATION_MODE === "strict";
  if (strict && e.PLATFORM_PROXY_ISOLATION === false) {
    problems.push("PLATFORM_PROXY_ISOLATION=false contradicts PLATFORM_NETWORK_ISOLATION_MODE=strict (strict mode enforces proxy isolation): unset PLATFORM_PROXY_ISOLATION or choose the environment mode");
  }
  if (!e.PLATFORM_NETWORK_MANAGEMENT) {
    if (strict) problems.push("PLATFORM_NETWORK_ISOLATION_MODE=strict needs PLATFORM_NETWORK_MANAGEMENT=true");
    if (e.PLATFORM_PROXY_ISOLATION === true) problems.push("PLATFORM_PROXY_ISOLATION=true needs PLATFORM_NETWORK_MANAGEMENT=true");
    if (e.PLATFORM_OVERLAY_ENCRYPTION) {
      problems.push("PLATFORM_OVERLAY_ENCRYPTION=true needs PLATFORM_NETWORK_MANAGEMENT=true (without it the platform creates no overlay network to encrypt)");
    }
  }
  if (problems.length) throw new ConfigError(`Invalid configuration:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  return {
    management: e.PLATFORM_NETWORK_MANAGEMENT,
    isolation: e.PLATFORM_NETWORK_ISOLATION_MODE,
    proxyIsolation: e.PLATFORM_NETWORK_MANAGEMENT && (strict || e.PLATFORM_PROXY_ISOLATION === true),
    overlayEncryption: e.PLATFORM_OVERLAY_ENCRYPTION,
    maxNetworks: e.PLATFORM_MAX_NETWORKS,
  };
}
