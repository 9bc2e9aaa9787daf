import { z } from "zod";
import { CommitSha } from "../validation/inputs.js";
import { QueryBoolean, Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";

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

export const DeploymentDetail = Deployment.extend({
  trigger: DeploymentTrigger,
  force: z.boolean(),
  server_uuid: z.string(),
  started_at: Timestamp.nullable(),
  reason: z.string().nullable().meta({ description: "Why the deployment failed or was cancelled" }),
  logs: z.string().meta({ description: "Build and rollout output, the most recent part when it exceeded the cap (docs/deployments.md)" }),
}).meta({ id: "DeploymentDetail" });
export type DeploymentDetail = z.infer<typeof DeploymentDetail>;
