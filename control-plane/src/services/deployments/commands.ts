import type { Db } from "../../db/client.js";
import type { TeamScope } from "../../domain/scope.js";
import { Invalid, Busy, Rejected } from "../../domain/errors.js";
import { newUuid } from "../../lib/ids.js";
import { limitReason, type DeployScheduler, type DeploymentServiceDeps } from "../../jobs/deploy-scheduler.js";
import { assertEnvironmentNetworkFits, NetworkLimitError } from "../network-plan.js";
import type { DeploymentOutcomes } from "./outcomes.js";
import { withApp, type DeploymentRow } from "./queries.js";
import type { DeploymentTrigger } from "@capstan/shared";

/** When a client refused for a full deploy queue may try again (Retry-After). */
const RETRY_FULL_QUEUE_S = 30;

export interface NewDeployment {
  trigger: DeploymentTrigger;
  force: boolean;
  commit: string | null;
  commitMessage?: string | null;
}

/**
 * What users do to deployments: deploy (a deployment row admitted as queued, refused when its
 * server's queue is full; the scheduler in jobs/deploy-scheduler.ts starts it) and cancel.
 */
export class DeploymentCommands {
  private readonly db: Db;

  constructor(
    private readonly deps: DeploymentServiceDeps,
    private readonly scheduler: DeployScheduler,
    private readonly outcomes: DeploymentOutcomes,
  ) {
    this.db = deps.db;
  }

  // -------------------------------------------------------------------------------------------
  // Triggers

  /**
   * POST /applications/{uuid}/deploy: the caller needs deploy on the application's environment.
   * 422 when the server has no room for the environment network the deployment would create
   * (PLATFORM_MAX_NETWORKS): nothing is queued. Webhooks (enqueue) skip this check: their
   * caller is a git provider, so the deployment fails with the reason where the team sees it.
   */
  async deploy(scope: TeamScope, applicationUuid: string, input: { force: boolean; commitSha: string | null }) {
    const app = await scope.application(applicationUuid, "deploy");
    if (input.commitSha && !app.gitBranch) {
      throw new Invalid({ commit_sha: ["Only applications deployed from a git repository have commits."] });
    }
    try {
      await assertEnvironmentNetworkFits(this.scheduler.planCtx(this.db), { serverId: app.serverId, environmentId: app.environmentId });
    } catch (err) {
      if (!(err instanceof NetworkLimitError)) throw err;
      // Named under environment_name, as a database's: the environment whose network has no room.
      throw new Invalid({ environment_name: [limitReason(err)] }, limitReason(err));
    }
    return this.enqueue(app, { trigger: "api", force: input.force, commit: input.commitSha });
  }

  /**
   * Admits a deployment of the application: refused with 429 when its server already has
   * queueLimit deployments waiting, then started as soon as the scheduler may.
   */
  async enqueue(
    app: { id: number; teamId: number; serverId: number; gitBranch: string | null },
    input: NewDeployment,
  ): Promise<{ uuid: string }> {
    const { queueLimit } = this.deps.settings;
    const uuid = newUuid();
    await this.db.$transaction(
      async (tx) => {
        await this.scheduler.lockServer(tx, app.serverId);
        const waiting = await tx.deployment.count({ where: { serverId: app.serverId, status: "queued" } });
        if (waiting >= queueLimit) {
          throw new Busy(
            RETRY_FULL_QUEUE_S,
            `The deploy queue of this application's server is full (${waiting} deployments waiting, limit ${queueLimit}). Retry later or cancel queued deployments.`,
          );
        }
        await tx.deployment.create({
          data: {
            uuid,
            teamId: app.teamId,
            applicationId: app.id,
            serverId: app.serverId,
            status: "queued",
            trigger: input.trigger,
            force: input.force,
            commit: input.commit,
            commitMessage: input.commitMessage ?? null,
            branch: app.gitBranch,
          },
        });
      },
      { maxWait: 10_000, timeout: 15_000 },
    );
    this.scheduler.kick(app.serverId);
    return { uuid };
  }

  // -------------------------------------------------------------------------------------------
  // Cancel

  /**
   * queued: cancelled at once. in_progress: its job is cancelled (the agent is told to stop the
   * build or rollout; the old container keeps serving), the deployment cancelled, and the slot
   * goes to the next queued one. Anything else: 400.
   */
  async cancel(scope: TeamScope, uuid: string): Promise<void> {
    let d: DeploymentRow = await scope.deployment(uuid, "deploy");
    const reason = "cancelled by a user";
    if (d.status === "queued") {
      const r = await this.db.deployment.updateMany({
        where: { id: d.id, status: "queued" },
        data: { status: "cancelled", reason, finishedAt: new Date() },
      });
      if (r.count) return;
      d = await this.db.deployment.findUniqueOrThrow({ where: { id: d.id }, include: withApp });
    }
    if (d.status === "in_progress") {
      // A deployment built on a build server moves from its app.build job to its app.deploy
      // job once: a cancel that meets that move cancels the new job too (bounded: two phases).
      for (let round = 0; round < 3 && d.status === "in_progress"; round++) {
        if (d.jobId) {
          await this.deps.jobs.cancel(d.jobId, reason);
          // The job's outcome handler ended the deployment (cancelled, or what the job reached
          // first). A build that succeeded first does not go on: the update below wins.
          const job = await this.db.job.findUnique({ where: { id: d.jobId } });
          if (job && !(job.type === "app.build" && job.status === "succeeded")) await this.outcomes.settle(d.id, job);
        }
        // A claim whose job is not written yet (or whose job vanished) ends here; the claim
        // then finds it cancelled and writes no job.
        const r = await this.db.deployment.updateMany({
          where: { id: d.id, status: "in_progress", jobId: d.jobId },
          data: { status: "cancelled", reason, finishedAt: new Date() },
        });
        d = await this.db.deployment.findUniqueOrThrow({ where: { id: d.id }, include: withApp });
        if (r.count) break;
      }
      this.scheduler.kickTeam(d.teamId, d.serverId);
      if (d.status === "cancelled") return;
    }
    throw new Rejected(`The deployment is ${d.status.replace("_", " ")}; only queued or in_progress deployments can be cancelled.`);
  }

}
