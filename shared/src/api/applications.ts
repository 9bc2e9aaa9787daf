import { z } from "zod";
import { BuildPack } from "../protocol/deploy.js";
import {
  CpuLimit,
  EnvKey,
  EnvValue,
  FqdnUrl,
  GitBranch,
  GitUrl,
  HealthPath,
  HttpPath,
  ImageRef,
  MemoryLimit,
  MountPath,
  Port,
  PortList,
  RepoDirectory,
  RepoSlug,
  VolumeName,
} from "../validation/inputs.js";
import { HostPath } from "../validation/host-path.js";
import { multiline } from "../validation/text.js";
import { PaginationQuery, QueryBoolean, Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";
import { DeploymentStatus, DeploymentTrigger } from "./deployments.js";

// ---------------------------------------------------------------------------------------------
// Values

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

export const ApplicationName = z
  .string()
  .trim()
  .min(1)
  .max(255)
  .refine((v) => !CONTROL.test(v), "Must not contain control characters.");
export const ApplicationDescription = multiline(z.string().max(2000));

/** At most this many domains per application (the proxy route limit of a deployment). */
export const MAX_DOMAINS = 100;

/** One domain of an application as the proxy serves it. */
export interface DomainEntry {
  host: string;
  https: boolean;
  path: string;
  url: string;
}

/**
 * Parses `fqdn`: comma-separated URLs (`https://app.example.com`, `http://plain.example.com/api`,
 * or a bare host name, which means https). Returns the entries or a list of problems.
 */
export function parseDomains(value: string): { entries: DomainEntry[] } | { errors: string[] } {
  const parts = value
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  const errors: string[] = [];
  const entries: DomainEntry[] = [];
  if (parts.length > MAX_DOMAINS) return { errors: [`At most ${MAX_DOMAINS} domains.`] };
  const seen = new Set<string>();
  for (const part of parts) {
    if (!FqdnUrl.safeParse(part).success) {
      errors.push(`${JSON.stringify(part.slice(0, 100))}: use a URL like https://app.example.com (http:// switches HTTPS off for that domain).`);
      continue;
    }
    const u = new URL(/^[a-z]+:\/\//i.test(part) ? part : `https://${part}`);
    if (u.port) {
      errors.push(`${JSON.stringify(part.slice(0, 100))}: leave out the port; the proxy serves ports 80 and 443.`);
      continue;
    }
    const path = u.pathname.replace(/\/+$/, "") || "/";
    if (!HttpPath.safeParse(path).success) {
      errors.push(`${JSON.stringify(part.slice(0, 100))}: the path may hold letters, digits and URL punctuation only.`);
      continue;
    }
    const host = u.hostname.toLowerCase();
    const key = `${host}${path}`;
    if (seen.has(key)) {
      errors.push(`${host}${path === "/" ? "" : path} is listed twice.`);
      continue;
    }
    seen.add(key);
    const https = u.protocol === "https:";
    entries.push({ host, https, path, url: `${https ? "https" : "http"}://${host}${path === "/" ? "" : path}` });
  }
  return errors.length ? { errors } : { entries };
}

/**
 * `fqdn` (alias `domains`) in requests: comma-separated URLs, normalised to
 * `scheme://host[/path]`; an empty string means "no domain" (null).
 */
export const DomainList = z
  .string()
  .max(16_384)
  .transform((v, ctx) => {
    const r = parseDomains(v);
    if ("errors" in r) {
      for (const message of r.errors) ctx.addIssue({ code: "custom", message });
      return z.NEVER;
    }
    return r.entries.length ? r.entries.map((e) => e.url).join(",") : null;
  })
  .meta({ description: "Comma-separated URLs: https://app.example.com,http://plain.example.com/api. A bare host name means https. Empty: no domain." });

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * Contents sent "raw or base64" (Dockerfile, compose file). A raw Dockerfile or compose file
 * always holds a space, tab, brace or colon-space outside the base64 alphabet, so a value
 * made only of base64 characters (line breaks aside) whose decoding is valid UTF-8 text is
 * taken as base64; anything else is taken as it is.
 */
export function decodeMaybeBase64(value: string): string {
  const compact = value.replace(/[\r\n]/g, "").trim();
  if (compact.length < 8 || compact.length % 4 !== 0 || !BASE64.test(compact)) return value;
  // atob/btoa rather than Buffer: shared/ is also compiled without Node's types.
  const binary = atob(compact);
  // Canonical encoding only: stray characters would otherwise be dropped silently.
  if (btoa(binary) !== compact) return value;
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return value;
  }
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text) ? value : text;
}

/** A Dockerfile has a FROM instruction (after optional comments, parser directives and ARGs). */
export function looksLikeDockerfile(text: string): boolean {
  return /^[ \t]*FROM[ \t]+\S/im.test(text);
}

const MAX_FILE = 1_048_576;

export const DockerfileContent = multiline(z.string())
  .min(1)
  .max(2 * MAX_FILE)
  .transform((v) => decodeMaybeBase64(v))
  .refine((v) => v.length <= MAX_FILE, `At most ${MAX_FILE} characters once decoded.`)
  .refine((v) => !v.includes("\u0000"), "Must not contain NUL characters.")
  .refine((v) => looksLikeDockerfile(v), "Not a Dockerfile: it needs a FROM instruction (send the contents raw or base64-encoded).")
  .meta({ description: "Dockerfile contents, raw or base64-encoded" });

export const ComposeContent = multiline(z.string())
  .min(1)
  .max(2 * MAX_FILE)
  .transform((v) => decodeMaybeBase64(v))
  .refine((v) => v.length <= MAX_FILE, `At most ${MAX_FILE} characters once decoded.`)
  .refine((v) => !v.includes("\u0000"), "Must not contain NUL characters.")
  .meta({ description: "Compose YAML, raw or base64-encoded" });

/** An image tag as the Docker reference grammar defines it. */
export const ImageTag = z.string().trim().regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/, "Use a tag like 1.27 or latest.");

/**
 * `docker_registry_image_name` (may carry a tag or digest) plus an optional separate
 * `docker_registry_image_tag`; without either, `latest`. Returns the reference or an error.
 */
export function imageReference(name: string, tag: string | undefined): { ref: string } | { error: string } {
  const lastSlash = name.lastIndexOf("/");
  const hasDigest = name.includes("@");
  const hasTag = !hasDigest && name.lastIndexOf(":") > lastSlash;
  if (tag !== undefined) {
    if (hasDigest) return { error: "The image name already pins a digest; leave out docker_registry_image_tag." };
    if (hasTag) {
      if (name.slice(name.lastIndexOf(":") + 1) !== tag) return { error: "The image name already carries a different tag." };
      return { ref: name };
    }
    return { ref: `${name}:${tag}` };
  }
  return { ref: hasTag || hasDigest ? name : `${name}:latest` };
}

/** A branch to build: a valid git branch name without shell metacharacters. */
export const AppGitBranch = GitBranch;

/** A base directory inside the repository (no default here: PATCH must not reset it). */
export const BaseDirectory = z
  .string()
  .max(1024)
  .transform((v, ctx) => {
    const r = RepoDirectory.safeParse(v);
    if (r.success) return r.data;
    for (const issue of r.error.issues) ctx.addIssue({ code: "custom", message: issue.message });
    return z.NEVER;
  });

/** Repository URLs a public clone can use: no credentials, so no ssh. */
export const PublicGitUrl = GitUrl.refine(
  (v) => /^(https?|git):\/\//i.test(v),
  "Use an https://, http:// or git:// URL; repositories reached over SSH need /applications/private-deploy-key.",
);

/** Repository URLs for deploy-key clones: ssh://... or user@host:owner/repo.git. */
export const SshGitUrl = GitUrl.refine(
  (v) => /^ssh:\/\//i.test(v) || !/^[a-z][a-z0-9+.-]*:\/\//i.test(v),
  "Use an SSH URL: ssh://git@host/owner/repo.git or git@host:owner/repo.git.",
);

/** Build packs of applications built from a repository (the other two have their own create paths). */
export const GitBuildPack = BuildPack.exclude(["containerimage", "containercompose"], {
  error: "Use builder_a, builder_b, builder_c, builder_d or containerfile; images and compose files have their own create paths (/applications/dockerimage, /applications/dockercompose).",
});

export const VOLUME_NAME_MAX = 64;
export const StorageName = VolumeName.refine((v) => v.length <= VOLUME_NAME_MAX, `At most ${VOLUME_NAME_MAX} characters.`);

// ---------------------------------------------------------------------------------------------
// Create

const HealthFields = {
  health_check_enabled: z.boolean().optional(),
  health_check_path: HealthPath.optional(),
  health_check_port: Port.nullable().optional().meta({ description: "Defaults to the first of ports_exposes" }),
  health_check_interval: z.number().int().min(1).max(300).optional().meta({ description: "Seconds (default 5)" }),
  health_check_timeout: z.number().int().min(1).max(120).optional().meta({ description: "Seconds (default 5)" }),
  health_check_retries: z.number().int().min(1).max(50).optional().meta({ description: "Default 10" }),
  health_check_start_period: z.number().int().min(0).max(3600).optional().meta({ description: "Seconds (default 5)" }),
};

/** Settings every create path takes and PATCH changes. */
const SettingsFields = {
  description: ApplicationDescription.optional(),
  ports_exposes: PortList.optional().meta({ description: "Comma-separated container ports; the first receives proxied traffic (default 80)" }),
  fqdn: DomainList.optional(),
  domains: DomainList.optional().meta({ description: "Alias of fqdn" }),
  ...HealthFields,
  limits_memory: MemoryLimit.nullable().optional().meta({ description: "Memory limit such as 512m or 2g; null: none" }),
  limits_cpus: CpuLimit.nullable().optional().meta({ description: "CPU limit in cores such as 0.5 or 2; null: none" }),
};

/** The parameters the spec lists for POST /applications/public, taken by all six create paths. */
const CommonCreate = requestBody({
  project_uuid: Uuid,
  environment_name: z.string().trim().min(1).max(64),
  server_uuid: Uuid,
  destination_uuid: Uuid.meta({ description: "A destination (network) of that server" }),
  name: ApplicationName.optional(),
  ...SettingsFields,
});

const GitFields = {
  git_branch: AppGitBranch,
  build_pack: GitBuildPack,
  base_directory: BaseDirectory.optional().meta({ description: "Directory of the application inside the repository (default /)" }),
};

export const CreatePublicApplicationBody = CommonCreate.extend({ git_repository: PublicGitUrl, ...GitFields });
export const CreatePrivateGitAppApplicationBody = CommonCreate.extend({
  git_app_uuid: Uuid,
  git_repository: RepoSlug.meta({ description: "owner/name on the git app's host" }),
  ...GitFields,
});
export const CreateDeployKeyApplicationBody = CommonCreate.extend({
  private_key_uuid: Uuid,
  git_repository: SshGitUrl,
  ...GitFields,
});
export const CreateDockerfileApplicationBody = CommonCreate.extend({
  dockerfile: DockerfileContent,
  build_pack: z.literal("containerfile").optional(),
});
export const CreateDockerImageApplicationBody = CommonCreate.extend({
  docker_registry_image_name: ImageRef.meta({ description: "Image name, with tag or digest (default tag latest)" }),
  docker_registry_image_tag: ImageTag.optional(),
  build_pack: z.literal("containerimage").optional(),
});
export const CreateDockerComposeApplicationBody = CommonCreate.extend({
  docker_compose_raw: ComposeContent,
  build_pack: z.literal("containercompose").optional(),
});

export type CreateApplicationCommon = z.output<typeof CommonCreate>;

export const CreatedApplication = z
  .object({ uuid: z.string(), name: z.string(), fqdn: z.string().nullable() })
  .meta({ id: "CreatedApplication" });

// ---------------------------------------------------------------------------------------------
// Update

export const UpdateApplicationBody = requestBody({
  name: ApplicationName.optional(),
  ...SettingsFields,
  git_branch: AppGitBranch.optional(),
  git_repository: z.string().max(2048).optional().meta({ description: "Validated as the create path of the application's source requires" }),
  build_pack: GitBuildPack.optional(),
  base_directory: BaseDirectory.optional(),
  dockerfile: DockerfileContent.optional(),
  docker_registry_image_name: ImageRef.optional(),
  docker_registry_image_tag: ImageTag.optional(),
  docker_compose_raw: ComposeContent.optional(),
})
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: "Provide at least one field to change.", path: ["body"] });
export type UpdateApplicationBody = z.output<typeof UpdateApplicationBody>;

// ---------------------------------------------------------------------------------------------
// Reads

export const ApplicationParams = z.object({ uuid: resourceId("application", Uuid) });
export const ApplicationEnvParams = ApplicationParams.extend({ env_uuid: resourceId("env_var", Uuid) });
export const ApplicationStorageParams = ApplicationParams.extend({ storage_uuid: resourceId("storage", Uuid) });

export const APPLICATION_SOURCES = ["public", "private_git_app", "private_deploy_key", "dockerfile", "dockerimage", "dockercompose"] as const;
export const ApplicationSource = z.enum(APPLICATION_SOURCES);
export type ApplicationSource = z.infer<typeof ApplicationSource>;

export const Application = z
  .object({
    uuid: z.string(),
    name: z.string(),
    fqdn: z.string().nullable(),
    status: z.string().meta({ description: "Composite engine status, e.g. running:healthy; exited before the first deploy" }),
    build_pack: BuildPack,
    git_repository: z.string().nullable(),
    git_branch: z.string().nullable(),
    project_uuid: z.string(),
    environment_name: z.string(),
    server_uuid: z.string(),
    created_at: Timestamp,
  })
  .meta({ id: "Application" });
export type Application = z.infer<typeof Application>;
export const ApplicationList = listOf(Application);
export const ApplicationListQuery = PaginationQuery;

export const EnvVar = z
  .object({
    uuid: z.string(),
    key: z.string(),
    value: z.string().nullable().meta({ description: "null when masked: the .../envs routes (list, create, patch, bulk) show values to callers who may read the resource's secrets (full access, read scope); details always mask them" }),
    is_build_time: z.boolean(),
    is_preview: z.boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "EnvVar" });
export type EnvVar = z.infer<typeof EnvVar>;
export const EnvVarList = listOf(EnvVar);

export const Storage = z
  .object({
    uuid: z.string(),
    name: z.string(),
    mount_path: z.string(),
    host_path: z.string().nullable().meta({ description: "Set for a bind mount of a host directory" }),
    type: z.enum(["volume", "bind"]),
    volume_name: z.string().nullable().meta({ description: "Name of the Docker volume on the server (volumes only)" }),
    created_at: Timestamp,
  })
  .meta({ id: "Storage" });
export type Storage = z.infer<typeof Storage>;
export const StorageList = listOf(Storage);

export const ApplicationDeployment = z
  .object({
    uuid: z.string(),
    status: DeploymentStatus,
    trigger: DeploymentTrigger,
    commit: z.string().nullable(),
    commit_message: z.string().nullable(),
    branch: z.string().nullable(),
    created_at: Timestamp,
    started_at: Timestamp.nullable(),
    finished_at: Timestamp.nullable(),
  })
  .meta({ id: "ApplicationDeployment" });

export const ApplicationDetail = Application.extend({
  description: z.string(),
  source: ApplicationSource,
  project_name: z.string(),
  environment_uuid: z.string(),
  destination_uuid: z.string(),
  git_app_uuid: z.string().nullable(),
  private_key_uuid: z.string().nullable(),
  base_directory: z.string(),
  dockerfile: z.string().nullable(),
  docker_registry_image_name: z.string().nullable(),
  docker_compose_raw: z.string().nullable(),
  ports_exposes: z.string(),
  domains: z.array(z.object({ host: z.string(), https: z.boolean(), path: z.string(), url: z.string() })),
  health_check_enabled: z.boolean(),
  health_check_path: z.string(),
  health_check_port: z.number().int().nullable(),
  health_check_interval: z.number().int(),
  health_check_timeout: z.number().int(),
  health_check_retries: z.number().int(),
  health_check_start_period: z.number().int(),
  limits_memory: z.string().nullable(),
  limits_cpus: z.string().nullable(),
  envs: z.array(EnvVar).meta({ description: "Values masked (null); GET .../envs shows them to members who may manage" }),
  storages: z.array(Storage),
  deployments: z.array(ApplicationDeployment).meta({ description: "The 10 most recent, newest first" }),
  webhooks: z.record(z.string(), z.string()).meta({ description: "Inbound webhook URL per git provider" }),
  updated_at: Timestamp,
}).meta({ id: "ApplicationDetail" });
export type ApplicationDetail = z.infer<typeof ApplicationDetail>;

// ---------------------------------------------------------------------------------------------
// Delete, actions, logs

export const DELETE_DEFAULTS = { delete_configurations: true, delete_volumes: false, docker_cleanup: true } as const;

export const DeleteApplicationQuery = z.object({
  delete_configurations: QueryBoolean.optional().meta({ description: "Remove the application's containers and proxy routes from the server (default true). May also be sent in the JSON body." }),
  delete_volumes: QueryBoolean.optional().meta({ description: "Also delete its Docker volumes (default false). May also be sent in the JSON body." }),
  docker_cleanup: QueryBoolean.optional().meta({ description: "Also delete its images and build cache (default true). May also be sent in the JSON body." }),
});
export const DeleteApplicationBody = requestBody({
  delete_configurations: z.boolean().optional(),
  delete_volumes: z.boolean().optional(),
  docker_cleanup: z.boolean().optional(),
});

export const ApplicationActionResponse = z
  .object({
    message: z.string(),
    status: z.string().meta({ description: "The application's status after the action (or now, if it is still running)" }),
  })
  .meta({ id: "ApplicationActionResponse" });

const QueryInt = (min: number, max: number) =>
  z
    .string()
    .regex(/^[0-9]+$/, "Must be a non-negative integer.")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

export const LOGS_DEFAULTS = { since: 600, tail: 100 } as const;
export const ApplicationLogsQuery = z.object({
  since: QueryInt(0, 30 * 24 * 3600).optional().meta({ description: "Seconds of history (default 600; 0: all)" }),
  tail: QueryInt(1, 10_000).optional().meta({ description: "At most this many of the most recent lines (default 100)" }),
});
export const ApplicationLogs = z
  .object({
    container: z.string().nullable().meta({ description: "The container read; null when none runs" }),
    logs: z.string().meta({ description: "Lines with the engine's RFC 3339 timestamp prefix, oldest first" }),
    truncated: z.boolean(),
  })
  .meta({ id: "ApplicationLogs" });

// ---------------------------------------------------------------------------------------------
// Environment variables and storages

export const MAX_ENVS = 500;
export const MAX_STORAGES = 64;

export const CreateEnvBody = requestBody({
  key: EnvKey,
  value: EnvValue,
  is_build_time: z.boolean().default(false),
  is_preview: z.boolean().default(false),
});
export const UpdateEnvBody = requestBody({
  key: EnvKey,
  value: EnvValue.optional(),
  is_build_time: z.boolean().optional(),
  is_preview: z.boolean().default(false).meta({ description: "Which of the two variables of that key (default: the non-preview one)" }),
})
  .refine((b) => b.value !== undefined || b.is_build_time !== undefined, { message: "Provide value or is_build_time.", path: ["value"] });
export const BulkEnvBody = requestBody({
  variables: z
    .array(
      requestBody({
        key: EnvKey,
        value: EnvValue,
        is_build_time: z.boolean().optional(),
        is_preview: z.boolean().default(false),
      }),
    )
    .min(1)
    .max(MAX_ENVS),
})
  .superRefine((b, ctx) => {
    const seen = new Set<string>();
    b.variables.forEach((v, i) => {
      const k = `${v.key}\u0000${v.is_preview}`;
      if (seen.has(k)) ctx.addIssue({ code: "custom", path: ["variables", i, "key"], message: `${v.key} is listed twice.` });
      seen.add(k);
    });
  });
export const EnvMutation = z.object({ message: z.string(), data: EnvVar });
export const EnvBulkMutation = z.object({ message: z.string(), data: z.array(EnvVar) });

export const CreateStorageBody = requestBody({
  name: StorageName,
  mount_path: MountPath,
  host_path: HostPath.nullable().optional().meta({ description: "A host directory to bind-mount instead of a Docker volume" }),
});
export const StorageMutation = z.object({ message: z.string(), data: Storage });
