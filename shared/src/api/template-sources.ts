import { z } from "zod";
import { RelativeFolder } from "../validation/relative-path.js";
import { Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";

/**
 * Template sources (/api/v1/template-sources, spec 4.11): git repositories of compose templates
 * a team adds. The control plane clones them (a sync) and stores what it found; reads never
 * clone. auth_token is write-only: responses say only whether one is set (has_auth_token).
 */

export const TEMPLATE_SYNC_STATUSES = ["pending", "syncing", "synced", "failed"] as const;
export const TemplateSyncStatus = z.enum(TEMPLATE_SYNC_STATUSES);
export type TemplateSyncStatus = z.infer<typeof TemplateSyncStatus>;

const SSH_FORM = /^[A-Za-z0-9._-]+@[^:/]+:/;

/**
 * The repository: an https, http or git:// URL without credentials, query or fragment
 * (https://github.com/acme/templates.git). SSH URLs are refused with a reason: the API carries
 * a token, not a key (docs/decisions.md). Whether the host may be a loopback/link-local/metadata
 * address is decided by the control plane (PLATFORM_ALLOW_PRIVATE_ENDPOINTS), not here.
 */
export const TemplateRepositoryUrl = z
  .string()
  .trim()
  .max(2048)
  .superRefine((v, ctx) => {
    const fail = (message: string) => ctx.addIssue({ code: "custom", message, input: v });
    if (/[\s\u0000-\u001f\u007f]/.test(v)) return fail("No spaces or control characters.");
    if (v.startsWith("ssh://") || SSH_FORM.test(v)) {
      return fail("SSH repository URLs are not supported for template sources: use the https URL, with auth_token for a private repository.");
    }
    if (!URL.canParse(v)) return fail("Use a git repository URL such as https://github.com/acme/templates.git.");
    const u = new URL(v);
    if (!["https:", "http:", "git:"].includes(u.protocol)) return fail("The repository URL must use https, http or git.");
    if (u.username || u.password) return fail("Put the access token in auth_token, never in the URL.");
    if (!u.hostname) return fail("The repository URL needs a host.");
    if (u.pathname === "/" || u.pathname === "") return fail("The repository URL needs the repository's path.");
    if (u.search || u.hash || v.includes("?") || v.includes("#")) return fail("No query or fragment in the repository URL.");
  });

/** A branch name git accepts (git check-ref-format rules, the common subset). */
export const TemplateBranch = z
  .string()
  .trim()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._/+-]*$/, "Letters, digits, '.', '_', '/', '+' and '-', starting with a letter or digit.")
  .refine((v) => !v.includes("..") && !v.includes("//") && !v.endsWith("/") && !v.endsWith(".") && !v.endsWith(".lock") && !v.includes("/."), "Not a valid git branch name.");

/** The folder of the templates inside the repository; "" is its root. */
export const TemplateFolderPath = RelativeFolder;

const AuthToken = z
  .string()
  .min(1)
  .max(1024)
  .regex(/^[\x21-\x7e]+$/, "Printable characters without spaces.");

/** The slug of a name: lowercase letters and digits, runs of anything else one '-'. */
export function templateSourceSlug(name: string): string {
  return name
    .normalize("NFKD")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 64)
    .replace(/-+$/, "");
}

const Name = z
  .string()
  .trim()
  .min(1)
  .max(255)
  .refine((v) => templateSourceSlug(v) !== "", "The name needs at least one letter or digit (the slug is made from it).");

export const CreateTemplateSourceBody = requestBody({
  name: Name,
  repository_url: TemplateRepositoryUrl,
  branch: TemplateBranch.default("main"),
  folder_path: TemplateFolderPath.default(""),
  auth_token: AuthToken.optional().meta({ description: "Access token of a private repository (sent as HTTP basic credentials). Stored encrypted; never returned." }),
});
export type CreateTemplateSourceBody = z.output<typeof CreateTemplateSourceBody>;

export const UpdateTemplateSourceBody = requestBody({
  name: Name.optional(),
  repository_url: TemplateRepositoryUrl.optional(),
  branch: TemplateBranch.optional(),
  folder_path: TemplateFolderPath.optional(),
  auth_token: AuthToken.nullable().optional().meta({ description: "null removes the token" }),
  is_enabled: z.boolean().optional(),
}).refine((b) => Object.values(b).some((v) => v !== undefined), { message: "Provide at least one field to change.", path: ["body"] });
export type UpdateTemplateSourceBody = z.output<typeof UpdateTemplateSourceBody>;

export const TemplateSource = z
  .object({
    uuid: z.string(),
    name: z.string(),
    slug: z.string().meta({ description: "Made from the name at creation; unique in the team and never changed" }),
    repository_url: z.string(),
    branch: z.string(),
    folder_path: z.string().meta({ description: '"" is the repository root' }),
    is_enabled: z.boolean(),
    has_auth_token: z.boolean(),
    sync_status: TemplateSyncStatus,
    sync_error: z.string().nullable(),
    last_synced_at: Timestamp.nullable(),
    synced_commit: z.string().nullable().meta({ description: "The commit the listed templates come from" }),
    template_count: z.number().int(),
    broken_count: z.number().int().meta({ description: "Template files that failed the checks (see broken_templates in the detail)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "TemplateSource" });
export type TemplateSource = z.infer<typeof TemplateSource>;

export const TemplateSourceTemplate = z.object({
  name: z.string(),
  slogan: z.string(),
  tags: z.string().meta({ description: "Comma-separated" }),
  logo: z.string().nullable(),
  documentation: z.string(),
  lint: z.literal("ok").meta({ description: "Passed the parser and every check" }),
});

export const TemplateSourceDetail = TemplateSource.extend({
  templates: z.array(TemplateSourceTemplate),
  broken_templates: z.array(z.object({ file: z.string(), lint: z.string().meta({ description: "Why the template cannot be used" }) })),
  ignored_templates: z.array(z.string()).meta({ description: "Files whose header says ignore: true (drafts)" }),
}).meta({ id: "TemplateSourceDetail" });
export type TemplateSourceDetail = z.infer<typeof TemplateSourceDetail>;

export const TemplateSourceList = listOf(TemplateSource);
export const TemplateSourceParams = z.object({ uuid: resourceId("template_source", Uuid) });
export const TemplateSourceMutation = z.object({ message: z.string(), data: TemplateSource });
export const TemplateSourceCreated = z.object({
  message: z.string(),
  data: TemplateSource.meta({ description: "sync_status is pending: the sync starts at once, watch sync_status" }),
});
export const TemplateSyncAllResult = z.object({ message: z.string(), count: z.number().int() });
