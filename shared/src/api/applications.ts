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

/**
 * Coolify's names of build packs (its clients send them; docs/compatibility.md): the same build
 * systems under their other names. Accepted on input, stored and shown as Capstan's.
 */
export const COOLIFY_BUILD_PACKS = { nixpacks: "builder_a", static: "builder_b", dockerfile: "containerfile", dockercompose: "containercompose" } as const satisfies Record<string, BuildPack>;

const GIT_BUILD_PACKS = ["builder_a", "builder_b", "builder_c", "builder_d", "containerfile"] as const;
const GIT_BUILD_PACK_HINT =
  "Use builder_a, builder_b, builder_c, builder_d or containerfile; images and compose files have their own create paths (/applications/dockerimage, /applications/dockercompose).";

/** A build pack by Capstan's name or Coolify's, as Capstan's; `allowed` are the packs the path takes. */
function buildPackInput<const A extends readonly [BuildPack, ...BuildPack[]]>(allowed: A, hint: string) {
  // Only the aliases of packs this path takes: another one is refused with the path's hint.
  const aliases = Object.entries(COOLIFY_BUILD_PACKS).filter(([, to]) => (allowed as readonly string[]).includes(to)).map(([from]) => from);
  return z
    .enum([...allowed, ...aliases] as [string, ...string[]], { error: hint })
    .transform((v): A[number] => ((COOLIFY_BUILD_PACKS as Record<string, BuildPack>)[v] ?? v) as A[number])
    .meta({ description: `One of ${allowed.join(", ")}${aliases.length ? `; Coolify's names are accepted too (${aliases.map((a) => `${a} = ${(COOLIFY_BUILD_PACKS as Record<string, string>)[a]}`).join(", ")})` : ""}` });
}

/** Build packs of applications built from a repository (the other two have their own create paths). */
export const GitBuildPack = buildPackInput(GIT_BUILD_PACKS, GIT_BUILD_PACK_HINT);

export const VOLUME_NAME_MAX = 64;
export const StorageName = VolumeName.refine((v) => v.length <= VOLUME_NAME_MAX, `At most ${VOLUME_NAME_MAX} characters.`);

// ---------------------------------------------------------------------------------------------
// Create

const HealthFields = {
  health_check_enabled: z.boolean().optional(),
  health_check_path: HealthPath.optional(),
  // Coolify sends the port as a string ("3000"): the same number, accepted in either form.
  health_check_port: z
    .union([Port, z.string().regex(/^[0-9]{1,5}$/, "Use a port number.").transform(Number).pipe(Port)])
    .nullable()
    .optional()
    .meta({ description: "Defaults to the first of ports_exposes; a number, or its digits as a string" }),
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

/**
 * Coolify's `instant_deploy` (docs/compatibility.md): deploy right after the create or change.
 * It triggers a deployment, so it needs the token's deploy scope too.
 */
const InstantDeploy = z.boolean().optional().meta({ description: "Queue a deployment right away (default false); needs the deploy scope besides write" });

/** The parameters the spec lists for POST /applications/public, taken by all six create paths. */
const CommonCreate = requestBody({
  project_uuid: Uuid,
  environment_name: z.string().trim().min(1).max(64),
  server_uuid: Uuid,
  destination_uuid: Uuid.meta({ description: "A destination (network) of that server" }),
  name: ApplicationName.optional(),
  ...SettingsFields,
  instant_deploy: InstantDeploy,
});

/**
 * Coolify's commit to build on create and change; it defaults to HEAD, the branch head, which is
 * what a deployment builds here. Another commit is a deploy's commit_sha, not a setting.
 */
const GitCommitSha = z
  .literal("HEAD", { error: "Only HEAD (the branch head) is a setting here; deploy a given commit with commit_sha of POST /applications/{uuid}/deploy." })
  .optional()
  .meta({ description: "Coolify's field; only HEAD, what deployments build" });

const GitFields = {
  git_branch: AppGitBranch,
  build_pack: GitBuildPack,
  base_directory: BaseDirectory.optional().meta({ description: "Directory of the application inside the repository (default /)" }),
  git_commit_sha: GitCommitSha,
};

export const CreatePublicApplicationBody = CommonCreate.extend({ git_repository: PublicGitUrl, ...GitFields });
export const CreatePrivateGitAppApplicationBody = CommonCreate.extend({
  git_app_uuid: Uuid,
  git_repository: RepoSlug.meta({ description: "owner/name on the git app's host" }),
  ...GitFields,
});
/** Coolify's path and name of the same create (POST /applications/private-github-app, github_app_uuid). */
export const CreatePrivateGithubAppApplicationBody = CommonCreate.extend({
  github_app_uuid: Uuid.meta({ description: "The git app (/github-apps): Coolify's name of git_app_uuid" }),
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
  build_pack: buildPackInput(["containerfile"], "Only containerfile (Coolify: dockerfile) builds from a Dockerfile.").optional(),
});
export const CreateDockerImageApplicationBody = CommonCreate.extend({
  docker_registry_image_name: ImageRef.meta({ description: "Image name, with tag or digest (default tag latest)" }),
  docker_registry_image_tag: ImageTag.optional(),
  build_pack: z.literal("containerimage").optional(),
});
export const CreateDockerComposeApplicationBody = CommonCreate.extend({
  docker_compose_raw: ComposeContent,
  build_pack: buildPackInput(["containercompose"], "Only containercompose (Coolify: dockercompose) deploys a compose file.").optional(),
});

export type CreateApplicationCommon = z.output<typeof CommonCreate>;

export const CreatedApplication = z
  .object({
    uuid: z.string(),
    name: z.string(),
    fqdn: z.string().nullable(),
    deployment_uuid: z.string().nullable().optional().meta({ description: "With instant_deploy: the queued deployment, or null when none could be queued (message says why)" }),
    message: z.string().optional().meta({ description: "With instant_deploy: whether the deployment was queued" }),
  })
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
  git_commit_sha: GitCommitSha,
  dockerfile: DockerfileContent.optional(),
  docker_registry_image_name: ImageRef.optional(),
  docker_registry_image_tag: ImageTag.optional(),
  docker_compose_raw: ComposeContent.optional(),
  instant_deploy: InstantDeploy,
})
  .refine((b) => Object.entries(b).some(([k, v]) => k !== "instant_deploy" && k !== "git_commit_sha" && v !== undefined), { message: "Provide at least one field to change.", path: ["body"] });
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
  // resource backups (issue 19): resource_id of /resource-backups names an application by it
  id: z.number().int().meta({ description: "The integer id (resource_id of /resource-backups)" }),
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
    deployment_uuid: z.string().optional().meta({ description: "Start only: the deployment queued when start deploys (never deployed, or force)" }),
  })
  .meta({ id: "ApplicationActionResponse" });

/** Query parameters of start (Coolify's; docs/compatibility.md). */
export const ApplicationStartQuery = z.object({
  force: QueryBoolean.optional().meta({ description: "Deploy, rebuilding without the build cache, instead of starting the existing containers (Coolify's start always deploys)" }),
  instant_deploy: QueryBoolean.optional().meta({ description: "Coolify's \"skip the queue\"; accepted and ignored: deployments wait for their server's build slot" }),
});

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
  lines: QueryInt(1, 10_000).optional().meta({ description: "Coolify's name of tail (docs/compatibility.md); given with tail, the same value" }),
});
/** The line count of a logs request: tail, or Coolify's lines (both: the same value). */
export function logsTail(q: { tail?: number | undefined; lines?: number | undefined }): { tail: number | undefined } | { error: string } {
  if (q.tail !== undefined && q.lines !== undefined && q.tail !== q.lines) return { error: "Given with tail and a different value." };
  return { tail: q.tail ?? q.lines };
}
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

/**
 * Coolify's forms of a variable's flags (docs/compatibility.md). `is_buildtime` is Coolify's
 * later name of `is_build_time`. Every variable reaches the running container here, so
 * `is_runtime` may only be true; values are shown again to those who may manage the resource,
 * so `is_shown_once` may only be false: a client asking otherwise gets a 422, not a silent
 * difference.
 */
export const EnvVarAliases = {
  is_buildtime: z.boolean().optional().meta({ description: "Coolify's name of is_build_time" }),
  is_runtime: z
    .literal(true, { error: "Every variable reaches the running container: a build-only variable (is_runtime false) is not available." })
    .optional()
    .meta({ description: "Coolify's flag; only true (every variable reaches the container)" }),
  is_shown_once: z
    .literal(false, { error: "Values are shown again to callers who may manage the resource: is_shown_once true is not available." })
    .optional()
    .meta({ description: "Coolify's flag; only false" }),
};

/** The build-time flag given as is_build_time or Coolify's is_buildtime (both: the same value). */
function buildTimeFlag(b: { is_build_time?: boolean | undefined; is_buildtime?: boolean | undefined }, ctx: z.RefinementCtx, path: (string | number)[] = []): boolean | undefined {
  if (b.is_build_time !== undefined && b.is_buildtime !== undefined && b.is_build_time !== b.is_buildtime) {
    ctx.addIssue({ code: "custom", path: [...path, "is_buildtime"], message: "Given with is_build_time and a different value." });
  }
  return b.is_build_time ?? b.is_buildtime;
}

export const CreateEnvBody = requestBody({
  key: EnvKey,
  value: EnvValue,
  is_build_time: z.boolean().optional().meta({ description: "Default false" }),
  is_preview: z.boolean().default(false),
  ...EnvVarAliases,
}).transform((b, ctx) => ({ key: b.key, value: b.value, is_build_time: buildTimeFlag(b, ctx) ?? false, is_preview: b.is_preview }));
export const UpdateEnvBody = requestBody({
  key: EnvKey,
  value: EnvValue.optional(),
  is_build_time: z.boolean().optional(),
  is_preview: z.boolean().default(false).meta({ description: "Which of the two variables of that key (default: the non-preview one)" }),
  ...EnvVarAliases,
})
  .refine((b) => b.value !== undefined || b.is_build_time !== undefined || b.is_buildtime !== undefined, { message: "Provide value or is_build_time.", path: ["value"] })
  .transform((b, ctx) => ({ key: b.key, value: b.value, is_build_time: buildTimeFlag(b, ctx), is_preview: b.is_preview }));

const BulkEnvItem = requestBody({
  key: EnvKey,
  value: EnvValue,
  is_build_time: z.boolean().optional(),
  is_preview: z.boolean().default(false),
  ...EnvVarAliases,
});
/**
 * Bulk variables, sent as the spec's `variables` or Coolify's `data` (one of the two). Returns
 * the list, or adds the issues (a key listed twice, both names or neither).
 */
export function bulkVariables<T extends { key: string; is_preview?: boolean }>(b: { variables?: T[] | undefined; data?: T[] | undefined }, ctx: z.RefinementCtx): T[] {
  if (b.variables !== undefined && b.data !== undefined) {
    ctx.addIssue({ code: "custom", path: ["data"], message: "Send the list as variables or as data (Coolify's name), not both." });
    return [];
  }
  const list = b.variables ?? b.data;
  const field = b.variables !== undefined ? "variables" : "data";
  if (list === undefined) {
    ctx.addIssue({ code: "custom", path: ["variables"], message: "This field is required (or Coolify's name for it, data)." });
    return [];
  }
  const seen = new Set<string>();
  list.forEach((v, i) => {
    const k = `${v.key}\u0000${v.is_preview ?? false}`;
    if (seen.has(k)) ctx.addIssue({ code: "custom", path: [field, i, "key"], message: `${v.key} is listed twice.` });
    seen.add(k);
  });
  return list;
}
const BulkList = <T extends z.ZodType>(item: T) => z.array(item).min(1).max(MAX_ENVS);
export const BulkEnvBody = requestBody({
  variables: BulkList(BulkEnvItem).optional().meta({ description: "Required unless sent as data" }),
  data: BulkList(BulkEnvItem).optional().meta({ description: "Coolify's name of variables" }),
}).transform((b, ctx) => {
  const field = b.variables !== undefined ? "variables" : "data";
  return {
    variables: bulkVariables(b, ctx).map((v, i) => ({ key: v.key, value: v.value, is_build_time: buildTimeFlag(v, ctx, [field, i]), is_preview: v.is_preview })),
  };
});
export const EnvMutation = z.object({ message: z.string(), data: EnvVar });
/** The answer of a create: the spec's {message, data}, and the new variable's uuid at the top where Coolify's clients read it. */
export const EnvCreated = EnvMutation.extend({ uuid: z.string() });
export const EnvBulkMutation = z.object({ message: z.string(), data: z.array(EnvVar) });

export const CreateStorageBody = requestBody({
  name: StorageName,
  mount_path: MountPath,
  host_path: HostPath.nullable().optional().meta({ description: "A host directory to bind-mount instead of a Docker volume" }),
  // Coolify's storage kind (docs/compatibility.md): its "persistent" storages are these; its
  // "file" storages (a file's content written on the server) are not available.
  type: z
    .literal("persistent", { error: "Only persistent storages (a volume, or a bind mount with host_path) are available; file storages are not." })
    .optional()
    .meta({ description: "Coolify's storage kind; only persistent" }),
}).transform(({ type: _type, ...b }) => b);
export const StorageMutation = z.object({ message: z.string(), data: Storage });
/** The answer of a create: the spec's {message, data}, and the new object's uuid at the top where Coolify's clients read it. */
export const StorageCreated = StorageMutation.extend({ uuid: z.string() });
