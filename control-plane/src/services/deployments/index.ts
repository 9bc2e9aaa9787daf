import type { Logger } from "pino";
import type { Db } from "../../db/client.js";
import { chunks } from "../../db/chunks.js";
import type { TeamScope } from "../../domain/scope.js";
import { DeployScheduler, type DeploySchedulerSettings, type DeploymentServiceDeps } from "../../jobs/deploy-scheduler.js";
import { BuildHandoff } from "./build-handoff.js";
import { DeploymentCommands, type NewDeployment } from "./commands.js";
import { DeploymentOutcomes } from "./outcomes.js";
import { DeploymentQueries, type DeploymentDetailRow, type DeploymentListRow } from "./queries.js";

export type { DeploySchedulerSettings, DeploymentServiceDeps, NewDeployment, DeploymentDetailRow, DeploymentListRow };

/** A started deployment whose job was not written within this time was claimed by a replica that died: it is queued again. */
const CLAIM_STALE_MS = 120_000;
/** The sweep: reconciles finished jobs, requeues stale claims, fails deployments stuck without an agent, starts queued ones. */
const SWEEP_INTERVAL_MS = 2000;

type Window = { skip?: number; take?: number };

/**
 * Deployments (spec 4.7, section 3): the one entry the routes and other services use. Each
 * part has one job: commands.ts (deploy, cancel), queries.ts (reads), the scheduler
 * (jobs/deploy-scheduler.ts: starts queued deployments), build-handoff.ts (a build server's
 * image goes to the application's server), outcomes.ts (a job's end ends its deployment).
 */
export class DeploymentService {
  private readonly db: Db;
  readonly scheduler: DeployScheduler;
  readonly outcomes: DeploymentOutcomes;
  private readonly commands: DeploymentCommands;
  private readonly queries: DeploymentQueries;
  private timer: NodeJS.Timeout | null = null;
  private sweeping: Promise<void> = Promise.resolve();

  constructor(private readonly deps: DeploymentServiceDeps) {
    this.db = deps.db;
    this.scheduler = new DeployScheduler(deps);
    this.outcomes = new DeploymentOutcomes(deps, this.scheduler, new BuildHandoff(deps, this.scheduler));
    this.commands = new DeploymentCommands(deps, this.scheduler, this.outcomes);
    this.queries = new DeploymentQueries(deps);
    deps.jobs.onFinished("app.deploy", (job) => this.outcomes.onJobFinished(job));
    deps.jobs.onFinished("app.build", (job) => this.outcomes.onJobFinished(job));
  }

  get settings(): DeploySchedulerSettings {
    return this.deps.settings;
  }

  deploy(scope: TeamScope, applicationUuid: string, input: { force: boolean; commitSha: string | null }) {
    return this.commands.deploy(scope, applicationUuid, input);
  }

  enqueue(app: { id: number; teamId: number; serverId: number; gitBranch: string | null }, input: NewDeployment): Promise<{ uuid: string }> {
    return this.commands.enqueue(app, input);
  }

  cancel(scope: TeamScope, uuid: string): Promise<void> {
    return this.commands.cancel(scope, uuid);
  }

  list(scope: TeamScope, window: Window): Promise<DeploymentListRow[]> {
    return this.queries.list(scope, window);
  }

  count(scope: TeamScope): Promise<number> {
    return this.queries.count(scope);
  }

  get(scope: TeamScope, uuid: string): Promise<DeploymentDetailRow> {
    return this.queries.get(scope, uuid);
  }

  forStream(scope: TeamScope, uuid: string): Promise<{ id: number }> {
    return this.queries.forStream(scope, uuid);
  }

  streamState(id: number): Promise<{ status: string; jobId: string | null } | null> {
    return this.queries.streamState(id);
  }

  countForApplication(scope: TeamScope, applicationUuid: string): Promise<number> {
    return this.queries.countForApplication(scope, applicationUuid);
  }

  listForApplication(scope: TeamScope, applicationUuid: string, window: Window): Promise<DeploymentListRow[]> {
    return this.queries.listForApplication(scope, applicationUuid, window);
  }

  // -------------------------------------------------------------------------------------------
  // Sweep

  /**
   * What no single event guarantees, repaired on every replica every 2 s:
   * - deployments whose job ended while the replica that ended it could not run the hook (a
   *   build that ended moves on to its deploy phase, once);
   * - deployments whose job is gone (the build server was deleted): failed;
   * - claims whose job was never written (the claiming replica died): queued again;
   * - queued deployments of a server whose agent has been away for the whole deadline: failed;
   * - servers with queued deployments: a scheduling pass (agents reconnect, slots free up elsewhere).
   */
  async sweep(): Promise<void> {
    const now = Date.now();
    const open = await this.db.deployment.findMany({ where: { status: "in_progress", jobId: { not: null } }, select: { id: true, jobId: true } });
    for (const part of chunks(open)) {
      const jobs = await this.db.job.findMany({
        where: { id: { in: part.map((d) => d.jobId!) } },
        select: { id: true, type: true, serverId: true, status: true, result: true, error: true, finishedAt: true },
      });
      const byJob = new Map(jobs.map((j) => [j.id, j]));
      for (const d of part) {
        const job = byJob.get(d.jobId!);
        if (!job) {
          await this.db.deployment.updateMany({
            where: { id: d.id, status: "in_progress", jobId: d.jobId },
            data: { status: "failed", finishedAt: new Date(), reason: "the server running its job was removed" },
          });
        } else if (job.status === "succeeded" || job.status === "failed" || job.status === "cancelled") {
          await this.outcomes.settle(d.id, job);
        }
      }
    }

    await this.db.deployment.updateMany({
      where: { status: "in_progress", jobId: null, startedAt: { lt: new Date(now - CLAIM_STALE_MS) } },
      data: { status: "queued", startedAt: null, slotServerId: null },
    });

    const cutoff = new Date(now - this.deps.settings.timeoutMs);
    const stranded = await this.db.deployment.findMany({
      where: {
        status: "queued",
        createdAt: { lt: cutoff },
        server: { status: { not: "reachable" }, OR: [{ lastSeenAt: null }, { lastSeenAt: { lt: cutoff } }] },
      },
      select: { id: true },
    });
    for (const part of chunks(stranded.map((d) => d.id))) {
      await this.db.deployment.updateMany({
        where: { id: { in: part }, status: "queued" },
        data: {
          status: "failed",
          finishedAt: new Date(),
          reason: `deadline exceeded: the server's agent was not connected for ${Math.round(this.deps.settings.timeoutMs / 1000)} s`,
        },
      });
    }

    const waiting = await this.db.deployment.findMany({
      where: { status: "queued", server: { status: "reachable" } },
      distinct: ["serverId"],
      select: { serverId: true },
    });
    for (const { serverId } of waiting) await this.scheduler.schedule(serverId);
  }

  /** Starts the periodic sweep (instance attach); stop() ends it and waits for running passes. */
  startSweep(log: Pick<Logger, "error" | "warn">, intervalMs = SWEEP_INTERVAL_MS): void {
    this.scheduler.log = log;
    const loop = () => {
      this.sweeping = this.sweep()
        .catch((err) => this.scheduler.log.error({ err: { message: (err as Error).message } }, "deployment sweep failed"))
        .finally(() => {
          if (!this.timer) return;
          this.timer = setTimeout(loop, intervalMs);
          this.timer.unref();
        });
    };
    this.timer = setTimeout(loop, 0);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    const t = this.timer;
    this.timer = null;
    if (t) clearTimeout(t);
    await this.sweeping;
    await this.scheduler.stop();
  }
}
