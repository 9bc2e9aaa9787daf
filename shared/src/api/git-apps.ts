import { z } from "zod";
import { multiline } from "../validation/text.js";
import { Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";

/**
 * Base URLs of a git app's host: http(s), no credentials, query or fragment; a path is kept
 * (GitHub Enterprise serves its API under /api/v3). Trailing slashes are dropped.
 */
export const GitAppBaseUrl = z
  .string()
  .trim()
  .max(2048)
  .refine((v) => {
    if (!URL.canParse(v)) return false;
    const u = new URL(v);
    return (u.protocol === "https:" || u.protocol === "http:") && !!u.hostname && !u.username && !u.password && !u.search && !u.hash;
  }, "Use an http(s) URL without credentials, query or fragment, e.g. https://api.github.com.")
  .transform((v) => v.replace(/\/+$/, ""));

const GitAppName = z.string().trim().min(1).max(255);
const GitHubId = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);
/** The app's PEM private key (GitHub hands out RSA keys in PKCS#1 PEM). */
const GitAppPrivateKey = multiline(z.string().min(1).max(16_384));
const WebhookSecret = z.string().min(1).max(255);

export const CreateGitAppBody = requestBody({
  name: GitAppName,
  app_id: GitHubId,
  installation_id: GitHubId,
  private_key: GitAppPrivateKey.meta({ description: "The app's RSA private key (PEM); stored encrypted, never returned" }),
  api_url: GitAppBaseUrl.default("https://api.github.com"),
  html_url: GitAppBaseUrl.default("https://github.com"),
  webhook_secret: WebhookSecret.optional().meta({ description: "Secret of the app's push webhooks; stored encrypted, never returned" }),
});
export type CreateGitAppBody = z.output<typeof CreateGitAppBody>;

export const UpdateGitAppBody = requestBody({
  name: GitAppName.optional(),
  app_id: GitHubId.optional(),
  installation_id: GitHubId.optional(),
  private_key: GitAppPrivateKey.optional(),
  api_url: GitAppBaseUrl.optional(),
  html_url: GitAppBaseUrl.optional(),
  webhook_secret: WebhookSecret.nullable().optional().meta({ description: "null removes it" }),
})
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: "Provide at least one field to change.", path: ["body"] });
export type UpdateGitAppBody = z.output<typeof UpdateGitAppBody>;

export const GitApp = z
  .object({
    uuid: z.string(),
    name: z.string(),
    app_id: z.number().int(),
    installation_id: z.number().int(),
    api_url: z.string(),
    html_url: z.string(),
    has_webhook_secret: z.boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "GitApp" });
export type GitApp = z.infer<typeof GitApp>;

export const GitAppList = listOf(GitApp);
export const GitAppParams = z.object({ uuid: resourceId("git_app", Uuid) });
export const GitAppMutation = z.object({ message: z.string(), data: GitApp });
