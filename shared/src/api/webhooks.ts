import { z } from "zod";
import { Uuid, resourceId } from "./common.js";

/** Git providers whose push webhooks an application accepts, each with its signature scheme. */
export const WEBHOOK_PROVIDERS = ["github", "gitlab", "gitea", "bitbucket"] as const;
export const WebhookProvider = z.enum(WEBHOOK_PROVIDERS);
export type WebhookProvider = z.infer<typeof WebhookProvider>;

/**
 * Path of an inbound webhook. The application is not looked up in a team (the caller has no
 * token): the signature made with the application's secret is what authenticates the call.
 */
export const WebhookParams = z.object({
  uuid: Uuid.meta({ description: "uuid of the application" }),
  provider: WebhookProvider,
});

export const WebhookResponse = z
  .object({
    message: z.string(),
    deployment_uuid: z.string().optional().meta({ description: "Present when the push created a deployment" }),
  })
  .meta({ id: "WebhookResponse" });

/** Push webhooks of a git app (GitHub App style): one URL per git app, for all its applications. */
export const GitAppWebhookParams = z.object({ uuid: Uuid.meta({ description: "uuid of the git app" }) });

export const GitAppWebhookResponse = z
  .object({
    message: z.string(),
    deployment_uuids: z.array(z.string()).meta({ description: "One deployment per application of the git app that deploys the pushed repository and branch" }),
  })
  .meta({ id: "GitAppWebhookResponse" });

export const WebhookSecretParams = z.object({ uuid: resourceId("application", Uuid) });

export const WebhookUrls = z.object(Object.fromEntries(WEBHOOK_PROVIDERS.map((p) => [p, z.string()])) as Record<WebhookProvider, z.ZodString>);

export const WebhookSecretResponse = z
  .object({
    message: z.string(),
    secret: z.string().meta({ description: "The new secret; shown only in this response" }),
    urls: WebhookUrls,
  })
  .meta({ id: "WebhookSecret" });

/** The inbound webhook URL of each provider for an application (publicUrl: the instance's base URL). */
export function webhookUrls(publicUrl: string, applicationUuid: string): Record<WebhookProvider, string> {
  const base = `${publicUrl.replace(/\/+$/, "")}/api/v1/webhooks/applications/${encodeURIComponent(applicationUuid)}`;
  return Object.fromEntries(WEBHOOK_PROVIDERS.map((p) => [p, `${base}/${p}`])) as Record<WebhookProvider, string>;
}
