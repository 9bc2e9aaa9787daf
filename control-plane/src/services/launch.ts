import { OPEN_DEPLOYMENT_STATUSES, type CreateApplicationCommon, type UpdateApplicationBody } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { Busy, Conflict, DomainError, NotFound } from "../domain/errors.js";
import type { ApplicationService, CreateSource } from "./applications.js";
import type { DeploymentService } from "./deployments/index.js";
import type { DatabaseService } from "./databases.js";

/** What an instant deploy after a create or change came to: the deployment, or why there is none. */
export interface InstantDeploy {
  deploymentUuid: string | null;
  message: string;
}

/** One resource of a deploy-by-uuid request and what was done with it. */
export interface LaunchedResource {
  resourceUuid: string;
  message: string;
  deploymentUuid?: string;
}

/**
 * What "start" and "deploy" mean to the users of this API family when a request names more than
 * one step (docs/compatibility.md, docs/applications.md): starting an application that never
 * ran deploys it; a create or change may deploy right away; one request may deploy several
 * applications and start several databases. Each step is the one service's rule (permissions,
 * limits, queues); this only chains them.
 */
export class LaunchService {
  constructor(
    private readonly db: Db,
    private readonly applications: ApplicationService,
    private readonly deployments: DeploymentService,
    private readonly databases: DatabaseService,
  ) {}

  /**
   * Start: an application that has never been deployed (no finished deployment) has no
   * containers to start, so it is deployed; `force` deploys too, rebuilding without the build
   * cache (Coolify's start is a deploy). Otherwise its containers are started (the agent's
   * app.action job).
   */
  async start(scope: TeamScope, uuid: string, opts: { force: boolean }): Promise<{ status: number; message: string; appStatus: string; deploymentUuid?: string }> {
    const app = await scope.application(uuid, "deploy");
    const deployed = !opts.force && (await this.db.deployment.findFirst({ where: { applicationId: app.id, status: "finished" }, select: { id: true } })) !== null;
    if (deployed) return this.applications.action(scope, uuid, "start");
    // As start's own rule (ApplicationService.action): not while a deployment is queued or
    // running, so repeated starts of a new application do not queue one deployment each.
    const open = await this.db.deployment.findFirst({ where: { applicationId: app.id, status: { in: [...OPEN_DEPLOYMENT_STATUSES] } }, select: { id: true } });
    if (open) throw new Conflict(`Application ${app.name} has a deployment queued or in progress; cancel it or wait for it to end first.`);
    const d = await this.deployments.deploy(scope, uuid, { force: opts.force, commitSha: null });
    const why = opts.force ? "force: deploying it without the build cache" : "it has never been deployed, so it is being deployed";
    return { status: 200, message: `Deployment queued: ${why}.`, appStatus: app.status, deploymentUuid: d.uuid };
  }

  /** Creates an application; with `instantDeploy`, queues its first deployment (a refusal is reported, the application stays). */
  async create(scope: TeamScope, input: CreateApplicationCommon & CreateSource, instantDeploy: boolean) {
    const app = await this.applications.create(scope, input);
    return { ...app, ...(instantDeploy ? { instant: await this.instantDeploy(scope, app.uuid) } : {}) };
  }

  /** Changes an application; with `instantDeploy`, queues a deployment of the new settings. */
  async update(scope: TeamScope, uuid: string, input: UpdateApplicationBody, instantDeploy: boolean): Promise<InstantDeploy | undefined> {
    await this.applications.update(scope, uuid, input);
    return instantDeploy ? this.instantDeploy(scope, uuid) : undefined;
  }

  /**
   * The deploy step after a create or change, which has happened: a domain rule refusing the
   * deployment (a full queue, no room for the environment's network) is reported in the
   * answer rather than turned into an error that would hide that the create succeeded.
   */
  private async instantDeploy(scope: TeamScope, uuid: string): Promise<InstantDeploy> {
    try {
      const d = await this.deployments.deploy(scope, uuid, { force: false, commitSha: null });
      return { deploymentUuid: d.uuid, message: "Deployment queued." };
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      return { deploymentUuid: null, message: `Not deployed: ${err.message}` };
    }
  }

  /**
   * GET|POST /deploy?uuid=a,b: every uuid is found first (an application or a database of the
   * team, with deploy on its environment), so an unknown or hidden one (404) or one the caller
   * may not deploy (403) stops the request before anything happens. Then applications are
   * deployed and databases started, in the order given. A full deploy queue stops the request
   * (429, as the single deploy answers; what was done before stays); any other refusal of one
   * resource is reported in its message and the others go on.
   */
  async deployMany(scope: TeamScope, uuids: string[], opts: { force: boolean }): Promise<LaunchedResource[]> {
    const targets: { uuid: string; kind: "application" | "database"; name: string }[] = [];
    for (const [i, uuid] of uuids.entries()) {
      try {
        const app = await scope.application(uuid, "deploy");
        targets.push({ uuid, kind: "application", name: app.name });
        continue;
      } catch (err) {
        if (!(err instanceof NotFound)) throw err;
      }
      try {
        const db = await scope.database(uuid, "deploy");
        targets.push({ uuid, kind: "database", name: db.name });
      } catch (err) {
        // Named by its place in the list, not echoed: a 404 says nothing of another team's ids.
        if (err instanceof NotFound) throw new NotFound("Resource", `No application or database of this team has uuid number ${i + 1} of the list.`);
        throw err;
      }
    }
    const out: LaunchedResource[] = [];
    for (const t of targets) {
      try {
        if (t.kind === "application") {
          const d = await this.deployments.deploy(scope, t.uuid, { force: opts.force, commitSha: null });
          out.push({ resourceUuid: t.uuid, message: `Application ${t.name} deployment queued.`, deploymentUuid: d.uuid });
        } else {
          const r = await this.databases.action(scope, t.uuid, "start");
          out.push({ resourceUuid: t.uuid, message: r.status === 200 ? `Database ${t.name} started.` : r.message });
        }
      } catch (err) {
        if (err instanceof Busy || !(err instanceof DomainError)) throw err;
        out.push({ resourceUuid: t.uuid, message: `${t.kind === "application" ? "Application" : "Database"} ${t.name} not ${t.kind === "application" ? "deployed" : "started"}: ${err.message}` });
      }
    }
    return out;
  }
}
