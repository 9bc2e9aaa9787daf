import { z } from "zod";
import {
  CommitSha,
  CpuLimit,
  DomainName,
  EnvKey,
  EnvValue,
  GitBranch,
  GitUrl,
  HealthPath,
  HttpPath,
  ImageRef,
  MemoryLimit,
  MountPath,
  Port,
  VolumeName,
} from "../validation/inputs.js";
import { HostPath } from "../validation/host-path.js";
import { DockerName } from "./names.js";
import { NetworkSpec } from "./networks.js";
import { RouteOwnership } from "./routing.js";

/** Spec section 2: the seven build packs. builder_a..builder_d are documented in docs/builders.md. */
export const BUILD_PACKS = ["builder_a", "containerfile", "containercompose", "containerimage", "builder_b", "builder_c", "builder_d"] as const;
export const BuildPack = z.enum(BUILD_PACKS);
export type BuildPack = z.infer<typeof BuildPack>;

/** Build packs that turn a source tree into an image; the others bring a Dockerfile, an image or a compose file. */
export const SOURCE_BUILDERS = ["builder_a", "builder_b", "builder_c", "builder_d"] as const;
export type SourceBuilder = (typeof SOURCE_BUILDERS)[number];

/** Names of the base images a source builder may use; the instance maps each to an image reference. */
export const BASE_IMAGE_ROLES = ["node", "python", "go", "static", "runtime"] as const;
export const BaseImageRole = z.enum(BASE_IMAGE_ROLES);
export type BaseImageRole = z.infer<typeof BaseImageRole>;
export const BaseImages = z.record(BaseImageRole, ImageRef);
export type BaseImages = z.infer<typeof BaseImages>;

export const EnvMap = z.record(EnvKey, EnvValue);

/** How the agent authenticates a clone. Secrets travel only inside the job payload (sealed at rest). */
export const GitAuth = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("none") }),
  /** Deploy key: used for this clone only, never written to the host's ~/.ssh. */
  z.object({ kind: z.literal("ssh"), private_key: z.string().min(1).max(16_384) }),
  /** Installation token of a git app, sent as HTTP basic auth (x-access-token). */
  z.object({ kind: z.literal("token"), username: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/), token: z.string().regex(/^[A-Za-z0-9._~+/=-]{1,512}$/) }),
]);
export type GitAuth = z.infer<typeof GitAuth>;

/**
 * Credentials of a container registry (docs/deployments.md, build servers): sent to the engine
 * in its X-Registry-Auth header only, never in argv or logs.
 */
export const RegistryAuth = z.object({
  username: z.string().min(1).max(255).regex(/^[^\s:]+$/, "no spaces or ':'"),
  password: z.string().min(1).max(4096).regex(/^[^\r\n]+$/, "one line"),
});
export type RegistryAuth = z.infer<typeof RegistryAuth>;

export const ImageSource = z.object({
  kind: z.literal("image"),
  image: ImageRef,
  /** Credentials for pulling this image (an image a build server pushed to the instance's registry). */
  auth: RegistryAuth.nullable().optional(),
  /** Pull even when the engine has an image of that name (the registry holds the truth). */
  always_pull: z.boolean().optional(),
  /**
   * A build server built it for this application: older ones are pruned after the rollout, as
   * images the agent builds itself are. Absent for a user's own image (nothing to prune).
   */
  built_for_app: z.boolean().optional(),
});
export const DockerfileSource = z.object({ kind: z.literal("dockerfile"), dockerfile: z.string().min(1).max(1_048_576) });
export const GitSource = z.object({ kind: z.literal("git"), url: GitUrl, branch: GitBranch, commit: CommitSha.nullable(), auth: GitAuth });

export const DeploySource = z.discriminatedUnion("kind", [
  ImageSource,
  DockerfileSource,
  GitSource,
  /** Compose YAML already checked and rewritten by the control plane (labels, networks, names). */
  z.object({ kind: z.literal("compose"), compose: z.string().min(1).max(1_048_576) }),
]);
export type DeploySource = z.infer<typeof DeploySource>;

export const HealthCheck = z.object({
  path: HealthPath,
  port: Port,
  interval_s: z.number().int().min(1).max(300),
  timeout_s: z.number().int().min(1).max(120),
  retries: z.number().int().min(1).max(50),
  start_period_s: z.number().int().min(0).max(3600),
});
export type HealthCheck = z.infer<typeof HealthCheck>;

/** A volume (by name) or a bind mount (by host path), mounted at mount_path. */
export const Mount = z.union([
  z.object({ volume: VolumeName, mount_path: MountPath }),
  z.object({ host_path: HostPath, mount_path: MountPath }),
]);
export type Mount = z.infer<typeof Mount>;

/** One host name the proxy routes to the application; https false keeps that name on plain HTTP. */
export const ProxyRoute = z.object({ host: DomainName, https: z.boolean(), path: HttpPath.default("/") });
export type ProxyRoute = z.infer<typeof ProxyRoute>;

/** The per-server reverse proxy (Caddy), configured through its admin API from container labels. */
export const ProxySettings = z.object({
  /** Container name of the proxy; its data volume is `<name>-data`. One proxy per engine. */
  name: VolumeName.default("capstan-proxy"),
  image: ImageRef,
  /** Networks the proxy joins to reach the applications it routes to. */
  networks: z.array(VolumeName).min(1).max(256),
  /** Networks the agent creates first when missing (the dedicated proxy network). */
  ensure_networks: z.array(NetworkSpec).max(4).default([]),
  /** Host ports of HTTP and HTTPS. */
  http_port: Port,
  https_port: Port,
  /**
   * Which project's resources may serve which host (protocol/routing.ts); absent from older
   * control planes and when the table is too large, then the labels alone decide.
   */
  ownership: RouteOwnership.optional(),
});
export type ProxySettings = z.infer<typeof ProxySettings>;

export const AppRef = z.object({ uuid: z.string().regex(/^[a-z0-9-]{1,64}$/), name: z.string().max(255) });

/**
 * What the control plane's compose rewrite writes under `x-capstan` in the rendered file, and
 * the agent checks against the job before running compose.
 */
export const ComposeMeta = z.object({
  project: z.string(),
  app_uuid: z.string(),
  deployment_uuid: z.string(),
  network: z.string(),
  /** Container name of the public service. */
  public_container: z.string(),
  /** Container names of all services, in file order. */
  containers: z.array(z.string()),
});
export type ComposeMeta = z.infer<typeof ComposeMeta>;

/** The build part of a deployment: what a source build needs (app.deploy and app.build). */
export const BuildSettings = z.object({
  pack: BuildPack,
  /** `force`: rebuild without the engine's build cache. */
  no_cache: z.boolean(),
  /** Where the app lives inside the repository; "/" is the root. */
  base_directory: z.string().regex(/^\/[a-zA-Z0-9._/@+-]*$/).refine((v) => !v.split("/").some((s) => s === ".."), "traversal"),
  /** is_build_time variables: build args of the build, never baked into run env. */
  env: EnvMap,
  base_images: BaseImages,
});

export const DeployPayload = z.object({
  deployment_uuid: z.string().regex(/^[a-z0-9-]{1,64}$/),
  app: AppRef,
  source: DeploySource,
  build: BuildSettings,
  run: z.object({
    env: EnvMap,
    /** ports_exposes; the first is the proxy's upstream port. */
    ports: z.array(Port).max(64),
    health: HealthCheck.nullable(),
    mounts: z.array(Mount).max(64),
    network: VolumeName,
    /** Further networks the container joins (proxy network, shared networks attached by the user). */
    networks: z.array(DockerName).max(64).default([]),
    /** Networks the agent creates first when missing (environment / proxy networks; idempotent by name). */
    ensure_networks: z.array(NetworkSpec).max(16).default([]),
    /** Network the proxy reaches the container on (label capstan.proxy.network); null: `network`. */
    proxy_network: DockerName.nullable().default(null),
    memory: MemoryLimit.nullable(),
    cpus: CpuLimit.nullable(),
    routes: z.array(ProxyRoute).max(100),
  }),
  proxy: ProxySettings,
});
export type DeployPayload = z.infer<typeof DeployPayload>;

export const DeployResult = z.object({
  image: z.string(),
  /** The container (or compose project) now serving. */
  container: z.string(),
  commit: z.string().nullable(),
  /** Subject line of the commit, when the agent checked it out in this attempt. */
  commit_message: z.string().max(1000).nullable().optional(),
  /** Composite engine status after the rollout, e.g. running:healthy. */
  status: z.string(),
});

export const APP_ACTIONS = ["start", "stop", "restart", "remove"] as const;
export const AppActionPayload = z.object({
  app: AppRef,
  action: z.enum(APP_ACTIONS),
  /** remove only: also delete the app's named volumes / its images and build cache. */
  delete_volumes: z.boolean().default(false),
  docker_cleanup: z.boolean().default(false),
  /**
   * remove only: also delete the configuration files the agent keeps for the app on the server
   * (a compose application's stored file). false keeps them; the containers and routes go
   * either way (issue 15). Absent means true: removal jobs written before the field existed
   * did so, and start/stop/restart do not use it.
   */
  delete_configurations: z.boolean().optional(),
  proxy: ProxySettings,
});
export const AppActionResult = z.object({ status: z.string() });

export const AppLogsPayload = z.object({
  app: AppRef,
  since_s: z.number().int().min(0).max(30 * 24 * 3600),
  tail: z.number().int().min(1).max(10_000),
  /**
   * The resource's known secret values (its passwords, its variables' values): masked in the
   * lines before they leave the agent (log/mask.ts). Absent from older control planes.
   */
  secrets: z.array(z.string().max(65_536)).max(1_024).optional(),
});
export const AppLogsResult = z.object({
  container: z.string().nullable(),
  /** Lines with the engine's RFC 3339 timestamp prefix, oldest first. */
  lines: z.array(z.string()),
  truncated: z.boolean(),
});

/**
 * app.build: a build server builds a deployment's image and pushes it to the instance's
 * registry; the application's own server then deploys it from there (docs/deployments.md).
 * Only sources that need a build go to a build server.
 */
export const BuildSource = z.discriminatedUnion("kind", [DockerfileSource, GitSource]);
export const BuildPayload = z.object({
  deployment_uuid: z.string().regex(/^[a-z0-9-]{1,64}$/),
  app: AppRef,
  source: BuildSource,
  build: BuildSettings,
  /** ports_exposes: source builders may use them (e.g. EXPOSE). */
  ports: z.array(Port).max(64),
  /** Where the image goes: `<registry>/<app uuid>:<deployment uuid>`. */
  push: z.object({ image: ImageRef, auth: RegistryAuth.nullable() }),
});
export type BuildPayload = z.infer<typeof BuildPayload>;

export const BuildResult = z.object({
  /** The pushed reference, by digest when the registry reported one (`repo@sha256:...`). */
  image: ImageRef,
  commit: z.string().nullable(),
  commit_message: z.string().max(1000).nullable().optional(),
});
export type BuildResult = z.infer<typeof BuildResult>;
