import {
  ApplicationDeploymentsParams,
  ApplicationDeploymentsQuery,
  DeployByUuidBody,
  DeployByUuidQuery,
  DeployByUuidResponse,
  MAX_DEPLOY_TARGETS,
  deployUuids,
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
import type { z } from "zod";
import { ERR } from "../dto.js";
import { Invalid, type FieldErrors } from "../../domain/errors.js";
import { paginate, type Page } from "../pagination.js";
import { route } from "../route.js";
import { followDeploymentLog } from "../../services/deployment-logs.js";
import { DEPLOY_LOG_CAP_CHARS } from "../../jobs/queue.js";
import { deploymentDto, deploymentDetailDto } from "../mappers/deployments.js";

/** A deploy parameter may come in the query string or the body; given in both, the values must agree. */
function merge<T>(name: string, fromQuery: T | undefined, fromBody: T | undefined, errors: FieldErrors): T | undefined {
  if (fromQuery !== undefined && fromBody !== undefined && fromQuery !== fromBody) {
    errors[name] = ["Given in both the query string and the body with different values."];
  }
  return fromBody ?? fromQuery;
}

/**
 * GET|POST /deploy (Coolify's deploy by uuid, docs/compatibility.md): the parameters from the
 * query string and a JSON body merged (given in both, the same value), then checked: uuid is
 * needed; tag is Coolify's and refused by name (resources carry no tags here); pr other than 0
 * (a pull request preview) likewise.
 */
function deployTargets(query: z.output<typeof DeployByUuidQuery>, body: z.output<typeof DeployByUuidBody> | undefined): { uuids: string[]; force: boolean } {
  const errors: FieldErrors = {};
  const uuid = merge("uuid", query.uuid === undefined ? undefined : deployUuids(query.uuid).join(","), body?.uuid === undefined ? undefined : deployUuids(body.uuid).join(","), errors);
  const tag = merge("tag", query.tag, body?.tag, errors);
  const force = merge("force", query.force, body?.force, errors) ?? false;
  const pr = merge("pr", query.pr, body?.pr, errors) ?? 0;
  const uuids = deployUuids(uuid);
  if (tag !== undefined) {
    errors.tag = ["Deploying by tag is not available: resources carry no tags here. Deploy by uuid (a comma-separated list of application and database uuids)."];
  } else if (uuids.length === 0) {
    errors.uuid = ["Give the uuid of an application or database to deploy (a comma-separated list for several)."];
  }
  if (uuids.length > MAX_DEPLOY_TARGETS) errors.uuid = [`At most ${MAX_DEPLOY_TARGETS} resources per request.`];
  if (pr !== 0) errors.pr = ["Pull request preview deployments are not available; leave pr out (or 0)."];
  if (Object.keys(errors).length) throw new Invalid(errors);
  return { uuids, force };
}

function deployByUuidRoute(method: "get" | "post") {
  return route({
    method,
    path: "/deploy",
    tag: "Deployments",
    summary: method === "get" ? "Deploy applications and start databases by uuid (Coolify's GET form)" : "Deploy applications and start databases by uuid (Coolify's form)",
    description:
      "Coolify's deploy endpoint (docs/compatibility.md). `uuid`: applications (each gets a queued deployment, as POST /applications/{uuid}/deploy) and databases (started, as POST /databases/{uuid}/start), " +
      `comma-separated, at most ${MAX_DEPLOY_TARGETS}; \`force\` rebuilds without the build cache. In the query string` +
      (method === "post" ? " or a JSON body (both: the same values)." : ".") +
      " Every uuid is checked first: one that is not the team's, or that the caller cannot see, is a 404, one it may not deploy a 403, and nothing happens. " +
      "A resource refused afterwards (its server's agent away, no room for its network) is reported in its item's message without deployment_uuid; a full deploy queue answers 429 (what came before it stays queued). " +
      "`tag` (deploy by tag) and `pr` other than 0 (pull request previews) are Coolify's and not available here: 422 naming them. " +
      (method === "get" ? "This GET changes state: it needs the deploy scope like the POST (Coolify's convention, not this API's); a HEAD does not act (400). " : "") +
      "The member needs the deploy permission on each resource's environment.",
    scope: "deploy",
    query: DeployByUuidQuery,
    ...(method === "post" ? { body: DeployByUuidBody } : {}),
    responses: {
      200: { description: "Per resource: what was done, with the deployment's uuid for applications", schema: DeployByUuidResponse },
      401: ERR[401],
      403: ERR[403],
      404: { description: "A uuid names no application or database of the team that the caller can see (nothing was done)" },
      422: { description: "No uuid, more than the limit, tag, pr, or values that differ between query and body" },
      429: { description: "A server's deploy queue is full (or the rate limit was exceeded); see Retry-After" },
    },
    async handler({ scope, services, query, body }) {
      const { uuids, force } = deployTargets(query as z.output<typeof DeployByUuidQuery>, body as z.output<typeof DeployByUuidBody> | undefined);
      const done = await services.launch.deployMany(scope, uuids, { force });
      return {
        body: {
          deployments: done.map((d) => ({ message: d.message, resource_uuid: d.resourceUuid, ...(d.deploymentUuid ? { deployment_uuid: d.deploymentUuid } : {}) })),
        },
      };
    },
  });
}

/**
 * Coolify's skip/take window over an application's deployments, instead of page/per_page (not
 * both): the same newest-first list, without the page meta.
 */
async function windowOrPage<T>(
  query: z.output<typeof ApplicationDeploymentsQuery>,
  count: () => Promise<number>,
  find: (w: { skip?: number; take?: number }) => Promise<T[]>,
): Promise<Page<T>> {
  const { skip, take, ...page } = query;
  if (skip === undefined && take === undefined) return paginate(page, count, find);
  if (page.page !== undefined || page.per_page !== undefined) {
    throw new Invalid({ skip: ["Use skip/take (Coolify's) or page/per_page, not both."] });
  }
  return { data: await find({ skip: skip ?? 0, take: take ?? 10 }) };
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
  deployByUuidRoute("get"),
  deployByUuidRoute("post"),
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
        body: await paginate(query, () => services.deployments.count(scope), async (w) => (await services.deployments.list(scope, w)).map(deploymentDto)),
      };
    },
  }),
  route({
    method: "get",
    path: "/deployments/applications/{application_uuid}",
    tag: "Deployments",
    summary: "Deployments of one application, most recent first",
    description: "page/per_page, or Coolify's skip/take (take defaults to 10 when only skip is given); not both.",
    params: ApplicationDeploymentsParams,
    query: ApplicationDeploymentsQuery,
    responses: { 200: { description: "Deployments", schema: DeploymentList }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, query }) {
      return {
        body: await windowOrPage(
          query,
          () => services.deployments.countForApplication(scope, params.application_uuid),
          async (w) => (await services.deployments.listForApplication(scope, params.application_uuid, w)).map(deploymentDto),
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
      return { body: deploymentDetailDto(await services.deployments.get(scope, params.uuid)) };
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
