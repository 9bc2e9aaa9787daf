import type { TeamScope } from "../../domain/scope.js";
import { DeployScheduler, type DeploySchedulerSettings, type DeploymentServiceDeps } from "../../jobs/deploy-scheduler.js";
import { BuildHandoff } from "./build-handoff.js";
import { DeploymentCommands, type NewDeployment } from "./commands.js";
import { DeploymentOutcomes } from "./outcomes.js";
import { DeploymentQueries, type DeploymentDetailRow, type DeploymentListRow } from "./queries.js";

export type { DeploySchedulerSettings, DeploymentServiceDeps, NewDeployment, DeploymentDetailRow, DeploymentListRow };

type Window = { skip?: number; take?: number };

/**
 * Deployments (spec 4.7, section 3): the one entry the routes and other services use. Each
 * part has one job: commands.ts (deploy, cancel), queries.ts (reads), the scheduler
 * (jobs/deploy-scheduler.ts: starts queued deployments), build-handoff.ts (a build server's
 * image goes to the application's server), outcomes.ts (a job's end ends its deployment).
 */
export class DeploymentService {
  readonly scheduler: DeployScheduler;
  readonly outcomes: DeploymentOutcomes;
  private readonly commands: DeploymentCommands;
  private readonly queries: DeploymentQueries;

  constructor(private readonly deps: DeploymentServiceDeps) {
    this.scheduler = new DeployScheduler(deps);
    this.outcomes = new DeploymentOutcomes(deps, this.scheduler, new BuildHandoff(deps, this.scheduler));
    this.commands = new DeploymentCommands(deps, this.scheduler, this.outcomes);
    this.queries = new DeploymentQueries(deps);
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

  /** Waits for the scheduling passes running in this process (instance close). */
  stop(): Promise<void> {
    return this.scheduler.stop();
  }
}
