import { GitAppWebhookParams, GitAppWebhookResponse, WebhookParams, WebhookResponse, WebhookSecretParams, WebhookSecretResponse } from "@capstan/shared";
import { ERR } from "../dto.js";
import { route } from "../route.js";

export const webhookRoutes = [
  route({
    method: "post",
    path: "/webhooks/applications/{uuid}/{provider}",
    tag: "Webhooks",
    summary: "Inbound git push webhook of an application",
    description:
      "Set this URL as a push webhook in the git provider, with the application's webhook secret " +
      "(POST /applications/{uuid}/webhook-secret). Signatures: GitHub `X-Hub-Signature-256` (HMAC-SHA256 of the body), " +
      "GitLab `X-Gitlab-Token` (the secret), Gitea `X-Gitea-Signature` (hex HMAC-SHA256), Bitbucket Cloud `X-Hub-Signature` " +
      "(sha256= HMAC-SHA256). A push to the application's branch queues a deployment of the pushed commit; other events " +
      "and branches are acknowledged and ignored. An unknown application and a bad signature get the same 401.",
    auth: "none",
    rawBody: { description: "The provider's event payload, as JSON or form-encoded (a `payload` field)" },
    params: WebhookParams,
    responses: {
      200: { description: "Deployment queued, or event ignored (the message says which)", schema: WebhookResponse },
      400: { description: "The payload is not JSON" },
      401: { description: "Missing or invalid signature, or no such application" },
      422: ERR[422],
      429: { description: "The server's deploy queue is full (or the rate limit was exceeded); see Retry-After" },
    },
    async handler({ services, params, req }) {
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      return { body: await services.webhooks.receive(params.provider, params.uuid, req.headers, body) };
    },
  }),
  route({
    method: "post",
    path: "/webhooks/git-apps/{uuid}",
    tag: "Webhooks",
    summary: "Push webhook of a git app: deploys its applications on a push to their branch",
    description:
      "Set this URL as the git app's webhook URL (with the git app's webhook_secret). Signed with `X-Hub-Signature-256` " +
      "(HMAC-SHA256 of the body). A push queues a deployment of the pushed commit for every application of the git app that " +
      "deploys that repository and branch. An unknown git app, one without a webhook secret, and a bad signature get the same 401.",
    auth: "none",
    rawBody: { description: "GitHub's event payload, as JSON or form-encoded (a `payload` field)" },
    params: GitAppWebhookParams,
    responses: {
      200: { description: "Deployments queued (possibly none: the message says why)", schema: GitAppWebhookResponse },
      400: { description: "The payload is not JSON" },
      401: { description: "Missing or invalid signature, or no such git app" },
      422: ERR[422],
      429: { description: "A server's deploy queue is full (or the rate limit was exceeded); see Retry-After" },
    },
    async handler({ services, params, req }) {
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      return { body: await services.webhooks.receiveGitApp(params.uuid, req.headers, body) };
    },
  }),
  route({
    method: "post",
    path: "/applications/{uuid}/webhook-secret",
    tag: "Applications",
    summary: "Rotate the application's webhook secret and show it once",
    description: "The previous secret stops working at once. Needs full access to the application's environment.",
    params: WebhookSecretParams,
    responses: { 200: { description: "The new secret and the webhook URLs", schema: WebhookSecretResponse }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const r = await services.webhooks.rotateSecret(scope, params.uuid);
      return { body: { message: "Webhook secret rotated; it is shown only now.", secret: r.secret, urls: r.urls } };
    },
  }),
];
