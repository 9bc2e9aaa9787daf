import { DeployResult, OPEN_DEPLOYMENT_STATUSES } from "@capstan/shared";
import type { Db } from "../../db/client.js";
import type { JobRow } from "../../jobs/queue.js";
import type { DeployScheduler, DeploymentServiceDeps } from "../../jobs/deploy-scheduler.js";
import type { BuildHandoff, JobEnd } from "./build-handoff.js";

const OPEN = [...OPEN_DEPLOYMENT_STATUSES];

export type { JobEnd };

/**
 * What the end of a deployment's job means for the deployment: after a build on a build
 * server, the hand-off to the deploy phase (build-handoff.ts); after its app.deploy job, its
 * end (finished, failed or cancelled) and the application's new status.
 */
export class DeploymentOutcomes {
  private readonly db: Db;

  constructor(
    private readonly deps: DeploymentServiceDeps,
    private readonly scheduler: DeployScheduler,
    private readonly handoff: BuildHandoff,
  ) {
    this.db = deps.db;
  }

  /** Outcome of app.build and app.deploy (jobs/outcome-map.ts): the deployment of the job moves on or ends with it. */
  async jobEnded(job: JobRow): Promise<void> {
    const d = await this.db.deployment.findUnique({ where: { jobId: job.id }, select: { id: true, serverId: true, teamId: true } });
    if (!d) return;
    await this.settle(d.id, job);
    this.scheduler.kickTeam(d.teamId, d.serverId);
  }

  /** What a deployment does when its current job ended: the next phase after a build, or its end. */
  async settle(deploymentId: number, job: JobEnd): Promise<void> {
    if (job.type === "app.build") await this.handoff.afterBuild(deploymentId, job);
    else await this.applyJobEnd(deploymentId, job);
  }

  /**
   * Ends an open deployment as its (app.deploy) job ended: succeeded -> finished (commit and
   * application status from the result), failed -> failed, cancelled -> cancelled, with the
   * job's reason. Conditional: a deployment already ended, or bound to another job, stays as it is.
   */
  private async applyJobEnd(deploymentId: number, job: JobEnd): Promise<void> {
    if (job.status !== "succeeded" && job.status !== "failed" && job.status !== "cancelled") return;
    const finishedAt = job.finishedAt ?? new Date();
    const open = { id: deploymentId, status: { in: OPEN }, jobId: job.id };
    if (job.status === "succeeded") {
      const result = DeployResult.safeParse(JSON.parse(job.result ?? "null"));
      const r = await this.db.deployment.updateMany({
        where: open,
        data: {
          status: "finished",
          finishedAt,
          reason: null,
          ...(result.success && result.data.commit ? { commit: result.data.commit } : {}),
          ...(result.success && result.data.commit_message ? { commitMessage: result.data.commit_message } : {}),
        },
      });
      if (r.count && result.success) {
        const d = await this.db.deployment.findUnique({ where: { id: deploymentId }, select: { applicationId: true } });
        if (d) await this.db.application.updateMany({ where: { id: d.applicationId }, data: { status: result.data.status } });
      }
      return;
    }
    await this.db.deployment.updateMany({
      where: open,
      data: { status: job.status, finishedAt, reason: job.error ?? (job.status === "cancelled" ? "cancelled" : "failed") },
    });
  }

}
