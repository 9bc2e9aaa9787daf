import {
  ApplicationDeploymentsParams,
  DeployBody,
  DeployParams,
  DeployQuery,
  DeployResponse,
  DeploymentDetail,
  DeploymentList,
  DeploymentParams,
  MessageBody,
  PaginationQuery,
} from "@capstan/shared";
import { ERR } from "../dto.js";
import { Invalid, type FieldErrors } from "../../domain/errors.js";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import type { DeploymentDetailRow, DeploymentListRow } from "../../services/deployments.js";
import { followDeploymentLog } from "../../services/deployment-logs.js";
import { DEPLOY_LOG_CAP_CHARS } from "../../jobs/queue.js";

const listDto = (d: DeploymentListRow) => ({
  uuid: d.uuid,
  application_uuid: d.applicationUuid,
  application_name: d.applicationName,
  status: d.status,
  commit: d.commit,
  commit_message: d.commitMessage,
  branch: d.branch,
  created_at: d.createdAt,
  finished_at: d.finishedAt,
});

const detailDto = (d: DeploymentDetailRow) => ({
  ...listDto(d),
  trigger: d.trigger,
  force: d.force,
  server_uuid: d.serverUuid,
  started_at: d.startedAt,
  reason: d.reason,
  logs: d.logs,
});

/** A deploy parameter may come in the query string or the body; given in both, the values must agree. */
function merge<T>(name: string, fromQuery: T | undefined, fromBody: T | undefined, errors: FieldErrors): T | undefined {
  if (fromQuery !== undefined && fromBody !== undefined && fromQuery !== fromBody) {
    errors[name] = ["Given in both the query string and the body with different values."];
  }
  return fromBody ?? fromQuery;
}

/** Keep-alive comments on an idle stream, so proxies in between do not close it. */
const HEARTBEAT_MS = 15_000;

export const deploymentRoutes = [
  route({
    method: "post",
    path: "/applications/{uuid}/deploy",
    tag: "Applications",
    summary: "Deploy an application (queues a deployment)",
    description:
      "`force` and `commit_sha` may be sent in the query string or in a JSON body (or both, with the same values). " +
      "Answers 429 with Retry-After when the server's deploy queue is full (PLATFORM_DEPLOY_QUEUE_LIMIT). " +
      "Answers 422 (nothing queued) when the deployment would create its environment's network on a server at PLATFORM_MAX_NETWORKS. " +
      "The member needs the deploy permission on the application's environment.",
    scope: "deploy",
    params: DeployParams,
    query: DeployQuery,
    body: DeployBody,
    responses: {
      200: { description: "Queued", schema: DeployResponse },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      422: { description: "Invalid parameters, or the server has no room for the environment's network (PLATFORM_MAX_NETWORKS)" },
      429: { description: "The server's deploy queue is full (or the rate limit was exceeded); see Retry-After" },
    },
    async handler({ scope, services, params, query, body }) {
      const errors: FieldErrors = {};
      const force = merge("force", query.force, body.force, errors) ?? false;
      const commitSha = merge("commit_sha", query.commit_sha, body.commit_sha, errors) ?? null;
      if (Object.keys(errors).length) throw new Invalid(errors);
      const d = await services.deployments.deploy(scope, params.uuid, { force, commitSha });
      return { body: { message: "Deployment queued.", deployment_uuid: d.uuid } };
    },
  }),
  route({
    method: "get",
    path: "/deployments",
    tag: "Deployments",
    summary: "Recent deployments of the team, newest first",
    description: "Members see the deployments of applications in environments they can see.",
    query: PaginationQuery,
    responses: { 200: { description: "Deployments", schema: DeploymentList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return {
        body: await paginate(query, () => services.deployments.count(scope), async (w) => (await services.deployments.list(scope, w)).map(listDto)),
      };
    },
  }),
  route({
    method: "get",
    path: "/deployments/applications/{application_uuid}",
    tag: "Deployments",
    summary: "Deployments of one application, most recent first",
    params: ApplicationDeploymentsParams,
    query: PaginationQuery,
    responses: { 200: { description: "Deployments", schema: DeploymentList }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params, query }) {
      return {
        body: await paginate(
          query,
          () => services.deployments.countForApplication(scope, params.application_uuid),
          async (w) => (await services.deployments.listForApplication(scope, params.application_uuid, w)).map(listDto),
        ),
      };
    },
  }),
  route({
    method: "get",
    path: "/deployments/{uuid}",
    tag: "Deployments",
    summary: "A deployment with its logs",
    params: DeploymentParams,
    responses: { 200: { description: "Deployment", schema: DeploymentDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: detailDto(await services.deployments.get(scope, params.uuid)) };
    },
  }),
  route({
    method: "post",
    path: "/deployments/{uuid}/cancel",
    tag: "Deployments",
    summary: "Cancel a queued or running deployment",
    description:
      "A queued deployment is cancelled at once. A running one has its build or rollout stopped on the server (the previous " +
      "container keeps serving), and its build slot goes to the next queued deployment. Any other status: 400.",
    scope: "deploy",
    params: DeploymentParams,
    responses: {
      200: { description: "Cancelled", schema: MessageBody },
      400: { description: "The deployment is not queued or in progress" },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
    },
    async handler({ scope, services, params }) {
      await services.deployments.cancel(scope, params.uuid);
      return { body: { message: "Deployment cancelled." } };
    },
  }),
  route({
    method: "get",
    path: "/deployments/{uuid}/logs/stream",
    tag: "Deployments",
    summary: "Follow a deployment's logs live (server-sent events)",
    description:
      "A text/event-stream: the stored output first, then new output as it is produced, one `data:` line per log line. " +
      "Ends with an `end` event (data: {\"status\": ...}) when the deployment ends, or with a `timeout` event after " +
      "PLATFORM_DEPLOY_TIMEOUT_S plus one minute (reconnect to continue; the stored output is sent again). " +
      "A `gap` event says output was dropped by the log cap while it was being read.",
    params: DeploymentParams,
    responses: {
      200: { description: "Event stream", contentType: "text/event-stream" },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
    },
    async handler({ scope, services, params, res }) {
      const d = await services.deployments.forStream(scope, params.uuid);
      res.status(200);
      res.setHeader("Content-Type", "text/event-stream; charset=utf-8");
      res.setHeader("Cache-Control", "no-cache, no-transform");
      res.setHeader("X-Accel-Buffering", "no");
      res.flushHeaders();
      const closed = new AbortController();
      res.on("close", () => closed.abort());
      const event = (name: string, data: unknown) => res.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
      const heartbeat = setInterval(() => res.write(": keep-alive\n\n"), HEARTBEAT_MS);
      try {
        const end = await followDeploymentLog({
          reader: services.reader,
          jobs: services.jobs,
          state: () => services.deployments.streamState(d.id),
          send: (text) => {
            const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n");
            res.write(lines.map((l) => `data: ${l.replace(/\r/g, "")}\n\n`).join(""));
          },
          gap: () => event("gap", { message: "Output was dropped: the log reached its cap while it was being read." }),
          signal: closed.signal,
          maxMs: services.deployments.settings.timeoutMs + 60_000,
          capChars: DEPLOY_LOG_CAP_CHARS,
        });
        if (end.ended) event("end", { status: end.status });
        else if (end.reason === "timeout") event("timeout", { message: "The stream reached its time limit; reconnect to continue." });
      } finally {
        clearInterval(heartbeat);
        res.end();
      }
      return { handled: true, body: null };
    },
  }),
];
