import { BuildResult } from "@capstan/shared";
import type { Db } from "../../db/client.js";
import { DEADLINE_EXCEEDED } from "../../jobs/queue.js";
import { NOTE, Unbound, networkFailure, type DeployScheduler, type DeploymentServiceDeps } from "../../jobs/deploy-scheduler.js";
import { buildDeployPayload, DeploySpecError } from "../deploy-spec.js";
import type { JobRow } from "../../jobs/queue.js";

/** What settling a deployment reads of its ended job. */
export type JobEnd = Pick<JobRow, "id" | "type" | "serverId" | "status" | "result" | "error"> & { finishedAt?: Date | null };

/**
 * The hand-off of a deployment built on a build server: when its app.build job ends, the
 * app.deploy job of the application's server takes over with the pushed image (or the
 * deployment ends with the build server's reason).
 */
export class BuildHandoff {
  private readonly db: Db;

  constructor(
    private readonly deps: DeploymentServiceDeps,
    private readonly scheduler: DeployScheduler,
  ) {
    this.db = deps.db;
  }

  /**
   * The build phase ended. Succeeded: the app.deploy job of the application's server is written
   * with the pushed image, bound in place of the build job in one transaction, only while the
   * deployment is still bound to that build job (so redelivered outcomes, the sweep and other
   * replicas move it on once, and a cancel in between wins). Failed or cancelled: the
   * deployment ends so, with the build server's reason.
   */
  async afterBuild(deploymentId: number, job: JobEnd): Promise<void> {
    if (job.status !== "succeeded" && job.status !== "failed" && job.status !== "cancelled") return;
    const d = await this.db.deployment.findUnique({ where: { id: deploymentId } });
    if (!d || d.status !== "in_progress" || d.jobId !== job.id) return;
    const end = (status: "failed" | "cancelled", reason: string) =>
      this.db.deployment.updateMany({
        where: { id: deploymentId, status: "in_progress", jobId: job.id },
        data: { status, reason, finishedAt: job.finishedAt ?? new Date() },
      });
    const builder = await this.scheduler.serverName(job.serverId);
    if (job.status === "cancelled") return void (await end("cancelled", job.error ?? "cancelled"));
    if (job.status === "failed") {
      const error = job.error ?? "no reason";
      // Deadline reasons keep their prefix: the deadline covers both phases.
      return void (await end("failed", error.startsWith(DEADLINE_EXCEEDED) ? `${error} (building on the build server ${builder})` : `the build on the build server ${builder} failed: ${error}`));
    }

    const result = BuildResult.safeParse(JSON.parse(job.result ?? "null"));
    if (!result.success) return void (await end("failed", `the build server ${builder} sent an invalid build result`));
    const registry = this.deps.settings.registry ?? null;
    const timeoutMs = this.scheduler.remainingMs(d);
    if (timeoutMs <= 0) return void (await end("failed", "deadline exceeded: the build took the whole deadline"));
    let payload;
    try {
      payload = await buildDeployPayload(
        this.deps.spec,
        { uuid: d.uuid, applicationId: d.applicationId, force: d.force, commit: result.data.commit ?? d.commit },
        { source: { kind: "image", image: result.data.image, auth: registry?.auth ?? null, always_pull: true, built_for_app: true }, record: false },
      );
    } catch (err) {
      if (!(err instanceof DeploySpecError)) this.scheduler.log.error({ err: { message: (err as Error).message }, deployment: d.uuid }, "building a deploy payload failed");
      return void (await end("failed", err instanceof DeploySpecError ? err.message : "The deployment could not be prepared (internal error)."));
    }
    const built = await this.db.job.findUnique({ where: { id: job.id }, select: { log: true } });
    const target = await this.scheduler.serverName(d.serverId);
    const log = `${built?.log ?? ""}${NOTE}built ${result.data.image}; deploying it on the application's server ${target}\n`;
    const bound = await this.db
      .$transaction(async (tx) => {
        await this.scheduler.lockAgainstEnvironmentRemoval(tx, d.serverId);
        await this.scheduler.recordNetworks(tx, d.serverId, d.teamId, payload);
        const jobId = await this.deps.jobs.enqueue(tx, d.serverId, "app.deploy", payload, timeoutMs, { log });
        const r = await tx.deployment.updateMany({
          where: { id: deploymentId, status: "in_progress", jobId: job.id },
          data: {
            jobId,
            slotServerId: d.serverId,
            ...(result.data.commit ? { commit: result.data.commit } : {}),
            ...(result.data.commit_message ? { commitMessage: result.data.commit_message } : {}),
          },
        });
        if (r.count === 0) throw new Unbound();
        return true;
      })
      .catch(async (err) => {
        if (err instanceof Unbound) return false;
        const reason = networkFailure(err);
        if (reason === null) throw err;
        await end("failed", reason);
        return false;
      });
    if (bound) await this.deps.jobs.kick(d.serverId);
  }

}
