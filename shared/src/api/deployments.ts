import { z } from "zod";
import { CommitSha } from "../validation/inputs.js";
import { MAX_PER_PAGE, PaginationQuery, QueryBoolean, Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";

/** Spec section 3: queued -> in_progress -> finished | failed | cancelled. */
export const DEPLOYMENT_STATUSES = ["queued", "in_progress", "finished", "failed", "cancelled"] as const;
export const DeploymentStatus = z.enum(DEPLOYMENT_STATUSES);
export type DeploymentStatus = z.infer<typeof DeploymentStatus>;
/** The statuses a deployment can still leave (and be cancelled in). */
export const OPEN_DEPLOYMENT_STATUSES = ["queued", "in_progress"] as const satisfies readonly DeploymentStatus[];

/** How a deployment was asked for: the API, a person in a dashboard, or a git push webhook. */
export const DEPLOYMENT_TRIGGERS = ["api", "manual", "webhook"] as const;
export const DeploymentTrigger = z.enum(DEPLOYMENT_TRIGGERS);
export type DeploymentTrigger = z.infer<typeof DeploymentTrigger>;

export const DeploymentParams = z.object({ uuid: resourceId("deployment", Uuid) });
export const ApplicationDeploymentsParams = z.object({ application_uuid: resourceId("application", Uuid) });
export const DeployParams = z.object({ uuid: resourceId("application", Uuid) });

/**
 * POST /applications/{uuid}/deploy takes its parameters in the query string or in a JSON body
 * (the spec does not say where); a parameter given in both places must have the same value.
 */
export const DeployQuery = z.object({
  force: QueryBoolean.optional().meta({ description: "Rebuild without the build cache (default false). May also be sent in the JSON body." }),
  commit_sha: CommitSha.optional().meta({ description: "Deploy this commit instead of the branch head (git applications). May also be sent in the JSON body." }),
});
export const DeployBody = requestBody({
  force: z.boolean().optional().meta({ description: "Rebuild without the build cache (default false)." }),
  commit_sha: CommitSha.optional().meta({ description: "Deploy this commit instead of the branch head (git applications)." }),
});
export type DeployBody = z.infer<typeof DeployBody>;

export const DeployResponse = z
  .object({ message: z.string(), deployment_uuid: z.string() })
  .meta({ id: "DeployResponse" });

/** At most this many resources per GET|POST /deploy request. */
export const MAX_DEPLOY_TARGETS = 50;

/** Comma-separated uuids of a /deploy request (Coolify's form). */
const CommaList = z.string().max(MAX_DEPLOY_TARGETS * 65);

/** The uuids of a /deploy request: split at commas, blanks and repeats dropped. */
export function deployUuids(list: string | undefined): string[] {
  return [...new Set((list ?? "").split(",").map((x) => x.trim()).filter(Boolean))];
}
const PullRequest = z.union([z.number(), z.string().regex(/^[0-9]+$/, "Must be a non-negative integer.").transform(Number)]).pipe(z.number().int().min(0).max(2_147_483_647));

/**
 * Coolify's deploy endpoint, GET or POST /deploy (docs/compatibility.md): the resources to
 * deploy by uuid, comma-separated, in the query string or a JSON body. `tag` and `pr` are
 * Coolify's too: there are no tags and no pull request previews here, so they are refused by
 * name rather than ignored.
 */
export const DeployByUuidQuery = z.object({
  uuid: CommaList.optional().meta({ description: "Uuids of applications (deployed) and databases (started), comma-separated" }),
  tag: z.string().max(1024).optional().meta({ description: "Coolify's deploy by tag: not available (422): resources carry no tags here" }),
  force: QueryBoolean.optional().meta({ description: "Rebuild without the build cache (default false)" }),
  pr: PullRequest.optional().meta({ description: "Coolify's pull request preview: only 0 (none) is accepted" }),
});
export const DeployByUuidBody = requestBody({
  uuid: CommaList.optional().meta({ description: "Uuids of applications and databases, comma-separated" }),
  tag: z.string().max(1024).optional().meta({ description: "Not available (422): resources carry no tags here" }),
  force: z.boolean().optional(),
  pr: PullRequest.optional().meta({ description: "Only 0 (none)" }),
});

export const DeployByUuidResponse = z
  .object({
    deployments: z.array(
      z.object({
        message: z.string(),
        resource_uuid: z.string(),
        deployment_uuid: z.string().optional().meta({ description: "Applications: the queued deployment; databases have none" }),
      }),
    ),
  })
  .meta({ id: "DeployByUuidResponse" });

export const Deployment = z
  .object({
    uuid: z.string(),
    application_uuid: z.string(),
    application_name: z.string(),
    status: DeploymentStatus,
    commit: z.string().nullable().meta({ description: "The requested commit, or the commit the build used once known" }),
    commit_message: z.string().nullable(),
    branch: z.string().nullable(),
    created_at: Timestamp,
    finished_at: Timestamp.nullable(),
  })
  .meta({ id: "Deployment" });
export type Deployment = z.infer<typeof Deployment>;

export const DeploymentList = listOf(Deployment);

const QueryCount = (min: number, max: number) => z.string().regex(/^[0-9]+$/, "Must be a non-negative integer.").transform(Number).pipe(z.number().int().min(min).max(max));
/**
 * The deployments of one application: the spec's page/per_page, or Coolify's skip/take
 * (docs/compatibility.md), not both.
 */
export const ApplicationDeploymentsQuery = PaginationQuery.extend({
  skip: QueryCount(0, 1_000_000).optional().meta({ description: "Coolify's window: deployments to skip (newest first); with take instead of page/per_page" }),
  take: QueryCount(1, MAX_PER_PAGE).optional().meta({ description: `Coolify's window: at most this many (1 to ${MAX_PER_PAGE})` }),
});

export const DeploymentDetail = Deployment.extend({
  trigger: DeploymentTrigger,
  force: z.boolean(),
  server_uuid: z.string(),
  started_at: Timestamp.nullable(),
  reason: z.string().nullable().meta({ description: "Why the deployment failed or was cancelled" }),
  logs: z.string().meta({ description: "Build and rollout output, the most recent part when it exceeded the cap (docs/deployments.md)" }),
}).meta({ id: "DeploymentDetail" });
export type DeploymentDetail = z.infer<typeof DeploymentDetail>;
