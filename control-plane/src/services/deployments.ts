import { BuildResult, DeployResult, DeploymentStatus, DeploymentTrigger, OPEN_DEPLOYMENT_STATUSES, type DeployPayload } from "@capstan/shared";
import type { Logger } from "pino";
import type { Db, Prisma } from "../db/client.js";
import { toInt, toIso, type SqlReader } from "../db/reader.js";
import { wholeRows } from "../db/relations.js";
import { lockInTransaction } from "../db/locks.js";
import type { TeamScope } from "../domain/scope.js";
import { Invalid, Busy, Rejected } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import { chunks } from "../db/chunks.js";
import { DEADLINE_EXCEEDED, type JobQueue, type JobRow } from "../jobs/queue.js";
import type { BuildRegistryConfig } from "../config.js";
import { buildDeployPayload, buildPayloadOf, DeploySpecError, needsBuild, pushTarget, type DeploySpecDeps } from "./deploy-spec.js";
import { assertEnvironmentNetworkFits, assertPlannedNetworksFit, NetworkLimitError, NetworkPlanGoneError, lockServersNetworks, recordPlannedNetworks, type NetworkPlanContext } from "./network-plan.js";

export interface DeploySchedulerSettings {
  /** Deadline of a started deployment (its app.deploy job), and how long queued ones wait for an absent agent. */
  timeoutMs: number;
  /** Deployments running at once per server. */
  buildConcurrency: number;
  /** Deployments waiting (queued) per server; one more is refused. */
  queueLimit: number;
  /** Where build servers push images (PLATFORM_BUILD_REGISTRY); null: build servers are not used. */
  registry?: BuildRegistryConfig | null;
}

/** When a client refused for a full deploy queue may try again (Retry-After). */
const RETRY_FULL_QUEUE_S = 30;

/** Lines the control plane writes into a deployment's log (the agents' lines have no such prefix). */
const NOTE = "[capstan] ";

export interface DeploymentServiceDeps {
  db: Db;
  reader: SqlReader;
  dialect: "sqlite" | "postgresql";
  jobs: JobQueue;
  spec: DeploySpecDeps;
  settings: DeploySchedulerSettings;
}

/** A started deployment whose job was not written within this time was claimed by a replica that died: it is queued again. */
const CLAIM_STALE_MS = 120_000;
/** The sweep: reconciles finished jobs, requeues stale claims, fails deployments stuck without an agent, starts queued ones. */
const SWEEP_INTERVAL_MS = 2000;

const OPEN = [...OPEN_DEPLOYMENT_STATUSES];

const withApp = {
  application: { select: { uuid: true, name: true, environmentId: true } },
  server: { select: { uuid: true } },
} satisfies Prisma.DeploymentInclude;
type DeploymentRow = Prisma.DeploymentGetPayload<{ include: typeof withApp }>;

export interface DeploymentListRow {
  uuid: string;
  applicationUuid: string;
  applicationName: string;
  status: DeploymentStatus;
  commit: string | null;
  commitMessage: string | null;
  branch: string | null;
  createdAt: string;
  finishedAt: string | null;
}

export interface DeploymentDetailRow extends DeploymentListRow {
  trigger: DeploymentTrigger;
  force: boolean;
  serverUuid: string;
  startedAt: string | null;
  reason: string | null;
  logs: string;
}

export interface NewDeployment {
  trigger: DeploymentTrigger;
  force: boolean;
  commit: string | null;
  commitMessage?: string | null;
}

type Window = { skip?: number; take?: number };

/**
 * Deployments (spec 4.7, section 3) and their scheduler. A deployment is admitted as queued
 * (refused when its server's queue is full), started as an app.deploy job when its server has
 * a free build slot and its application has no other deployment running, and ended from the
 * job's outcome. Admission and starting take a per-server lock (a PostgreSQL advisory lock;
 * on SQLite the one process's transactions are serial), and every state change is a
 * conditional update, so replicas neither double-start nor lose a deployment.
 */
export class DeploymentService {
  private readonly db: Db;
  private readonly scheduling = new Map<number, Promise<void>>();
  private readonly again = new Set<number>();
  private timer: NodeJS.Timeout | null = null;
  private sweeping: Promise<void> = Promise.resolve();
  private log: Pick<Logger, "error" | "warn"> = { error: () => {}, warn: () => {} };

  constructor(private readonly deps: DeploymentServiceDeps) {
    this.db = deps.db;
    deps.jobs.onFinished("app.deploy", (job) => this.onJobFinished(job));
    deps.jobs.onFinished("app.build", (job) => this.onJobFinished(job));
  }

  get settings(): DeploySchedulerSettings {
    return this.deps.settings;
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
      await assertEnvironmentNetworkFits(this.planCtx(this.db), { serverId: app.serverId, environmentId: app.environmentId });
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
        await this.lockServer(tx, app.serverId);
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
    this.kick(app.serverId);
    return { uuid };
  }

  // -------------------------------------------------------------------------------------------
  // Reads

  /**
   * The team's deployments the caller may see (those of applications in environments it can
   * see), newest first, in one statement through the plain read path with the team scope's
   * visibility rule (TeamScope.visibleRows).
   */
  async list(scope: TeamScope, window: Window): Promise<DeploymentListRow[]> {
    const { sql, params } = this.listSql(scope, `d."uuid", a."uuid" AS "applicationUuid", a."name" AS "applicationName", d."status", d."commit",
        d."commitMessage", d."branch", d."createdAt", d."finishedAt"`);
    let text = `${sql} ORDER BY d."id" DESC`;
    if (window.take !== undefined) {
      text += ` LIMIT ? OFFSET ?`;
      params.push(window.take, window.skip ?? 0);
    }
    const rows = await this.deps.reader.all<Record<string, unknown>>(text, params);
    return rows.map((r) => ({
      uuid: r.uuid as string,
      applicationUuid: r.applicationUuid as string,
      applicationName: r.applicationName as string,
      status: DeploymentStatus.parse(r.status),
      commit: (r.commit as string | null) ?? null,
      commitMessage: (r.commitMessage as string | null) ?? null,
      branch: (r.branch as string | null) ?? null,
      createdAt: toIso(r.createdAt),
      finishedAt: r.finishedAt === null || r.finishedAt === undefined ? null : toIso(r.finishedAt),
    }));
  }

  async count(scope: TeamScope): Promise<number> {
    const { sql, params } = this.listSql(scope, `COUNT(*) AS "n"`);
    const [row] = await this.deps.reader.all<{ n: unknown }>(sql, params);
    return toInt(row!.n);
  }

  private listSql(scope: TeamScope, columns: string): { sql: string; params: (string | number)[] } {
    const visible = scope.visibleRows(`d."teamId"`, "environment");
    const sql = `SELECT ${columns} FROM "Deployment" d
      JOIN "Application" a ON a."id" = d."applicationId"
      JOIN "Environment" e ON e."id" = a."environmentId"
      WHERE ${visible.sql}`;
    return { sql, params: visible.params };
  }

  async get(scope: TeamScope, uuid: string): Promise<DeploymentDetailRow> {
    const d = await scope.deployment(uuid, "view");
    const log = d.jobId ? await this.db.job.findUnique({ where: { id: d.jobId }, select: { log: true } }) : null;
    return { ...detailOf(d), logs: log?.log ?? "" };
  }

  /** A deployment's identity for the log stream (visibility checked). */
  async forStream(scope: TeamScope, uuid: string): Promise<{ id: number }> {
    const d = await scope.deployment(uuid, "view");
    return { id: d.id };
  }

  /** Status and job of a deployment, read fresh (the log stream polls this). */
  async streamState(id: number): Promise<{ status: string; jobId: string | null } | null> {
    return this.db.deployment.findUnique({ where: { id }, select: { status: true, jobId: true } });
  }

  async countForApplication(scope: TeamScope, applicationUuid: string): Promise<number> {
    const app = await scope.application(applicationUuid, "view");
    return this.db.deployment.count({ where: { applicationId: app.id } });
  }

  async listForApplication(scope: TeamScope, applicationUuid: string, window: Window): Promise<DeploymentListRow[]> {
    const app = await scope.application(applicationUuid, "view");
    const rows = await this.db.deployment.findMany({ where: { applicationId: app.id }, orderBy: { id: "desc" }, include: withApp, ...window });
    // Without their application, they were deleted with it while being read (db/relations.ts).
    return wholeRows(rows, ["application", "server"]).map(listOf);
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
          // The job's finish hook ended the deployment (cancelled, or what the job reached
          // first). A build that succeeded first does not go on: the update below wins.
          const job = await this.db.job.findUnique({ where: { id: d.jobId } });
          if (job && !(job.type === "app.build" && job.status === "succeeded")) await this.settle(d.id, job);
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
      this.kickTeam(d.teamId, d.serverId);
      if (d.status === "cancelled") return;
    }
    throw new Rejected(`The deployment is ${d.status.replace("_", " ")}; only queued or in_progress deployments can be cancelled.`);
  }

  // -------------------------------------------------------------------------------------------
  // Scheduler

  /** Asks for a scheduling pass of a server; passes of one server never overlap in this process. */
  kick(serverId: number): void {
    void this.schedule(serverId).catch((err) => this.log.error({ err: { message: (err as Error).message }, server: serverId }, "deployment scheduling failed"));
  }

  /** Runs scheduling passes for the server until nothing more can start. Resolves when done. */
  schedule(serverId: number): Promise<void> {
    const running = this.scheduling.get(serverId);
    if (running) {
      this.again.add(serverId);
      return running;
    }
    const run = (async () => {
      try {
        do {
          this.again.delete(serverId);
          const claimed = await this.claim(serverId);
          for (const id of claimed) {
            const started = await this.start(id);
            if (!started) this.again.add(serverId); // it ended at once: its slot is free again
          }
        } while (this.again.has(serverId));
      } finally {
        this.scheduling.delete(serverId);
      }
    })();
    this.scheduling.set(serverId, run);
    return run;
  }

  /** Asks for a scheduling pass of every server of the team with queued deployments (a build slot freed up). */
  kickTeam(teamId: number, serverId?: number): void {
    if (serverId !== undefined) this.kick(serverId);
    void this.db.deployment
      .findMany({ where: { teamId, status: "queued" }, distinct: ["serverId"], select: { serverId: true } })
      .then((rows) => rows.forEach((r) => r.serverId !== serverId && this.kick(r.serverId)))
      .catch((err) => this.log.error({ err: { message: (err as Error).message }, team: teamId }, "deployment scheduling failed"));
  }

  private async lockServer(tx: Prisma.TransactionClient, serverId: number): Promise<void> {
    await lockInTransaction(tx, this.deps.dialect, "deployments", serverId);
  }

  /** The build servers a deployment of this server may use: none without a registry, or when it is one itself. */
  private async buildServerIds(db: Prisma.TransactionClient | Db, serverId: number): Promise<number[]> {
    if (!this.deps.settings.registry) return [];
    const self = await db.server.findUnique({ where: { id: serverId }, select: { teamId: true, isBuildServer: true } });
    if (!self || self.isBuildServer) return [];
    const rows = await db.server.findMany({ where: { teamId: self.teamId, isBuildServer: true, id: { not: serverId } }, select: { id: true }, orderBy: { id: "asc" } });
    return rows.map((r) => r.id);
  }

  /** Build slots held per server: in_progress deployments whose slot (build server or own server) is there. */
  private async slotsHeld(tx: Prisma.TransactionClient, serverIds: number[]): Promise<Map<number, number>> {
    const rows = await tx.deployment.findMany({
      where: { status: "in_progress", OR: [{ slotServerId: { in: serverIds } }, { slotServerId: null, serverId: { in: serverIds } }] },
      select: { serverId: true, slotServerId: true },
    });
    const held = new Map<number, number>();
    for (const r of rows) {
      const at = r.slotServerId ?? r.serverId;
      held.set(at, (held.get(at) ?? 0) + 1);
    }
    return held;
  }

  /**
   * Marks the deployments that may start now as in_progress, under the locks of the server and
   * of the team's build servers (taken in id order, so passes of different servers never wait
   * on each other in a cycle): the oldest first, at most one per application, none while the
   * server's agent is away. A deployment that builds takes a slot of the least busy reachable
   * build server (and waits while they are all full); one that does not, or when no build
   * server is reachable, takes a slot of its own server. Returns their ids.
   */
  private async claim(serverId: number): Promise<number[]> {
    const { buildConcurrency } = this.deps.settings;
    const builderIds = await this.buildServerIds(this.db, serverId);
    const lockIds = [...new Set([serverId, ...builderIds])].sort((a, b) => a - b);
    return this.db.$transaction(
      async (tx) => {
        for (const id of lockIds) await this.lockServer(tx, id);
        const server = await tx.server.findUnique({ where: { id: serverId }, select: { status: true } });
        if (!server || server.status !== "reachable") return [];
        const builders = builderIds.length
          ? await tx.server.findMany({ where: { id: { in: builderIds }, isBuildServer: true, status: "reachable" }, select: { id: true }, orderBy: { id: "asc" } })
          : [];
        const held = await this.slotsHeld(tx, lockIds);
        const free = (id: number) => buildConcurrency - (held.get(id) ?? 0);
        const ownActive = await tx.deployment.findMany({ where: { serverId, status: "in_progress" }, select: { applicationId: true } });
        const busy = new Set(ownActive.map((a) => a.applicationId));
        const queued = await tx.deployment.findMany({
          where: { serverId, status: "queued" },
          orderBy: { id: "asc" },
          select: { id: true, applicationId: true, application: { select: { source: true, buildPack: true } } },
        });
        const claimed: number[] = [];
        const now = new Date();
        for (const d of queued) {
          if (busy.has(d.applicationId)) continue;
          let slot: number;
          if (builders.length && needsBuild(d.application)) {
            const best = builders.filter((b) => free(b.id) > 0).sort((a, b) => free(b.id) - free(a.id) || a.id - b.id)[0];
            if (!best) continue; // every build server is busy: it waits for a slot there
            slot = best.id;
          } else {
            if (free(serverId) <= 0) continue;
            slot = serverId;
          }
          busy.add(d.applicationId);
          const r = await tx.deployment.updateMany({ where: { id: d.id, status: "queued" }, data: { status: "in_progress", startedAt: now, slotServerId: slot } });
          if (r.count) {
            claimed.push(d.id);
            held.set(slot, (held.get(slot) ?? 0) + 1);
          }
        }
        return claimed;
      },
      { maxWait: 10_000, timeout: 15_000 },
    );
  }

  /** What is left of a started deployment's deadline (counted from its start, over both phases). */
  private remainingMs(d: { startedAt: Date | null }): number {
    return (d.startedAt?.getTime() ?? Date.now()) + this.deps.settings.timeoutMs - Date.now();
  }

  /**
   * Builds the payload of a claimed deployment and writes its first job (app.build on the
   * build server whose slot it took, or app.deploy on its own server), bound to the deployment
   * in one transaction (only while the deployment is still in_progress without a job: a cancel
   * or a requeue in between leaves no job behind). Returns false when the deployment ended here.
   */
  private async start(id: number): Promise<boolean> {
    const d = await this.db.deployment.findUnique({ where: { id } });
    if (!d || d.status !== "in_progress" || d.jobId) return !!d && d.status === "in_progress";
    const fail = async (reason: string) => {
      await this.db.deployment.updateMany({ where: { id, status: "in_progress", jobId: null }, data: { status: "failed", reason, finishedAt: new Date() } });
      return false;
    };
    const registry = this.deps.settings.registry ?? null;
    const slot = d.slotServerId ?? d.serverId;
    const remote = slot !== d.serverId && registry !== null;
    let payload;
    try {
      // The networks it asks for are recorded with its job (below), or with the deploy job after a remote build.
      payload = await buildDeployPayload(this.deps.spec, { uuid: d.uuid, applicationId: d.applicationId, force: d.force, commit: d.commit }, { record: false });
      if (remote) await assertPlannedNetworksFit(this.planCtx(this.db), { serverId: d.serverId, specs: payload.run.ensure_networks });
    } catch (err) {
      const known = err instanceof DeploySpecError ? err.message : networkFailure(err);
      if (known === null) this.log.error({ err: { message: (err as Error).message }, deployment: d.uuid }, "building a deploy payload failed");
      return fail(known ?? "The deployment could not be prepared (internal error).");
    }
    const timeoutMs = this.remainingMs(d);
    if (timeoutMs <= 0) return fail("deadline exceeded: the deployment did not start in time");
    let write: (tx: Prisma.TransactionClient) => Promise<string>;
    let runsOn = d.serverId;
    if (remote) {
      let build;
      try {
        build = buildPayloadOf(payload, { image: pushTarget(registry.location, payload.app.uuid, d.uuid), auth: registry.auth });
      } catch (err) {
        return fail(err instanceof DeploySpecError ? err.message : "The build could not be prepared (internal error).");
      }
      const [builder, target] = await Promise.all([this.serverName(slot), this.serverName(d.serverId)]);
      const log =
        `${NOTE}building on the build server ${builder}; the image goes to ${build.push.image}, ` +
        `then the application's server ${target} deploys it\n`;
      runsOn = slot;
      write = (tx) => this.deps.jobs.enqueue(tx, slot, "app.build", build, timeoutMs, { log });
    } else {
      const note = await this.localBuildNote(d.serverId, d.applicationId);
      write = (tx) => this.deps.jobs.enqueue(tx, d.serverId, "app.deploy", payload, timeoutMs, note ? { log: note } : {});
    }
    const bound = await this.db
      .$transaction(async (tx) => {
        await this.lockAgainstEnvironmentRemoval(tx, d.serverId);
        // The records exist exactly when the job does.
        if (!remote) await this.recordNetworks(tx, d.serverId, d.teamId, payload);
        const jobId = await write(tx);
        const r = await tx.deployment.updateMany({
          where: { id, status: "in_progress", jobId: null },
          data: { jobId, ...(runsOn === d.serverId ? { slotServerId: d.serverId } : {}) },
        });
        if (r.count === 0) throw new Unbound();
        return true;
      })
      .catch((err) => {
        if (err instanceof Unbound) return false;
        const reason = networkFailure(err);
        if (reason !== null) return fail(reason);
        throw err;
      });
    if (bound) await this.deps.jobs.kick(runsOn);
    return bound;
  }

  /**
   * The first statement of a transaction that writes a deployment's build or deploy job. An
   * environment's removal takes the same lock on every server of its team before it cancels the
   * jobs of its applications, so it either sees this job committed (and cancels it) or deletes
   * the deployment first (and this transaction binds nothing). Without it, under READ COMMITTED,
   * a job written at the same moment would run after the application's removal job.
   */
  private lockAgainstEnvironmentRemoval(tx: Prisma.TransactionClient, serverId: number): Promise<void> {
    return lockServersNetworks(tx, this.deps.dialect, [serverId]);
  }

  private planCtx(db: NetworkPlanContext["db"]): NetworkPlanContext {
    return { db, network: this.deps.spec.config.network, dialect: this.deps.spec.config.dialect };
  }

  /**
   * Records the networks an app.deploy payload (built with record: false) asks its server to
   * ensure, in the transaction that writes the job: a record is pending only while a job that
   * ensures it exists (its end resolves it: services/networks.ts).
   */
  private recordNetworks(tx: Prisma.TransactionClient, serverId: number, teamId: number, payload: DeployPayload): Promise<void> {
    return recordPlannedNetworks(this.planCtx(tx), {
      teamId,
      serverId,
      specs: [...payload.run.ensure_networks, ...payload.proxy.ensure_networks],
      proxyNetworks: payload.proxy.networks,
    });
  }

  private async serverName(id: number): Promise<string> {
    const s = await this.db.server.findUnique({ where: { id }, select: { name: true, uuid: true } });
    return s ? `${s.name} (${s.uuid})` : `#${id}`;
  }

  /**
   * Why a deployment that builds runs its build on its own server although the team has build
   * servers (a line for its log), or null when there is nothing to say.
   */
  private async localBuildNote(serverId: number, applicationId: number): Promise<string | null> {
    const app = await this.db.application.findUnique({ where: { id: applicationId }, select: { source: true, buildPack: true, teamId: true } });
    if (!app || !needsBuild(app)) return null;
    const self = await this.db.server.findUnique({ where: { id: serverId }, select: { isBuildServer: true } });
    if (!self || self.isBuildServer) return null;
    const builders = await this.db.server.count({ where: { teamId: app.teamId, isBuildServer: true, id: { not: serverId } } });
    if (builders === 0) return null;
    if (!this.deps.settings.registry) {
      return `${NOTE}the team has build servers, but they are not used without a registry (PLATFORM_BUILD_REGISTRY is not set): building on the application's server\n`;
    }
    return `${NOTE}no build server of the team is reachable: building on the application's server\n`;
  }

  /** JobQueue hook: the deployment of a finished app.build or app.deploy job moves on or ends with it. */
  private async onJobFinished(job: JobRow): Promise<void> {
    const d = await this.db.deployment.findUnique({ where: { jobId: job.id }, select: { id: true, serverId: true, teamId: true } });
    if (!d) return;
    await this.settle(d.id, job);
    this.kickTeam(d.teamId, d.serverId);
  }

  /** What a deployment does when its current job ended: the next phase after a build, or its end. */
  private async settle(deploymentId: number, job: JobEnd): Promise<void> {
    if (job.type === "app.build") await this.afterBuild(deploymentId, job);
    else await this.applyJobEnd(deploymentId, job);
  }

  /**
   * The build phase ended. Succeeded: the app.deploy job of the application's server is written
   * with the pushed image, bound in place of the build job in one transaction, only while the
   * deployment is still bound to that build job (so redelivered outcomes, the sweep and other
   * replicas move it on once, and a cancel in between wins). Failed or cancelled: the
   * deployment ends so, with the build server's reason.
   */
  private async afterBuild(deploymentId: number, job: JobEnd): Promise<void> {
    if (job.status !== "succeeded" && job.status !== "failed" && job.status !== "cancelled") return;
    const d = await this.db.deployment.findUnique({ where: { id: deploymentId } });
    if (!d || d.status !== "in_progress" || d.jobId !== job.id) return;
    const end = (status: "failed" | "cancelled", reason: string) =>
      this.db.deployment.updateMany({
        where: { id: deploymentId, status: "in_progress", jobId: job.id },
        data: { status, reason, finishedAt: job.finishedAt ?? new Date() },
      });
    const builder = await this.serverName(job.serverId);
    if (job.status === "cancelled") return void (await end("cancelled", job.error ?? "cancelled"));
    if (job.status === "failed") {
      const error = job.error ?? "no reason";
      // Deadline reasons keep their prefix: the deadline covers both phases.
      return void (await end("failed", error.startsWith(DEADLINE_EXCEEDED) ? `${error} (building on the build server ${builder})` : `the build on the build server ${builder} failed: ${error}`));
    }

    const result = BuildResult.safeParse(JSON.parse(job.result ?? "null"));
    if (!result.success) return void (await end("failed", `the build server ${builder} sent an invalid build result`));
    const registry = this.deps.settings.registry ?? null;
    const timeoutMs = this.remainingMs(d);
    if (timeoutMs <= 0) return void (await end("failed", "deadline exceeded: the build took the whole deadline"));
    let payload;
    try {
      payload = await buildDeployPayload(
        this.deps.spec,
        { uuid: d.uuid, applicationId: d.applicationId, force: d.force, commit: result.data.commit ?? d.commit },
        { source: { kind: "image", image: result.data.image, auth: registry?.auth ?? null, always_pull: true, built_for_app: true }, record: false },
      );
    } catch (err) {
      if (!(err instanceof DeploySpecError)) this.log.error({ err: { message: (err as Error).message }, deployment: d.uuid }, "building a deploy payload failed");
      return void (await end("failed", err instanceof DeploySpecError ? err.message : "The deployment could not be prepared (internal error)."));
    }
    const built = await this.db.job.findUnique({ where: { id: job.id }, select: { log: true } });
    const target = await this.serverName(d.serverId);
    const log = `${built?.log ?? ""}${NOTE}built ${result.data.image}; deploying it on the application's server ${target}\n`;
    const bound = await this.db
      .$transaction(async (tx) => {
        await this.lockAgainstEnvironmentRemoval(tx, d.serverId);
        await this.recordNetworks(tx, d.serverId, d.teamId, payload);
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
          await this.settle(d.id, job);
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
    for (const { serverId } of waiting) await this.schedule(serverId);
  }

  /** Starts the periodic sweep (instance attach); stop() ends it and waits for running passes. */
  startSweep(log: Pick<Logger, "error" | "warn">, intervalMs = SWEEP_INTERVAL_MS): void {
    this.log = log;
    const loop = () => {
      this.sweeping = this.sweep()
        .catch((err) => this.log.error({ err: { message: (err as Error).message } }, "deployment sweep failed"))
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
    await Promise.allSettled([...this.scheduling.values()]);
  }
}

class Unbound extends Error {}

const limitReason = (err: NetworkLimitError) => `The application's environment network cannot be created: ${err.message}`;

/** Why a deployment's networks cannot be recorded, as its reason; null for any other error. */
function networkFailure(err: unknown): string | null {
  if (err instanceof NetworkLimitError) return limitReason(err);
  if (err instanceof NetworkPlanGoneError) return err.message;
  return null;
}

/** What settling a deployment reads of its ended job. */
type JobEnd = Pick<JobRow, "id" | "type" | "serverId" | "status" | "result" | "error"> & { finishedAt?: Date | null };

function listOf(d: DeploymentRow): DeploymentListRow {
  return {
    uuid: d.uuid,
    applicationUuid: d.application.uuid,
    applicationName: d.application.name,
    status: DeploymentStatus.parse(d.status),
    commit: d.commit,
    commitMessage: d.commitMessage,
    branch: d.branch,
    createdAt: d.createdAt.toISOString(),
    finishedAt: d.finishedAt?.toISOString() ?? null,
  };
}

function detailOf(d: DeploymentRow): Omit<DeploymentDetailRow, "logs"> {
  return {
    ...listOf(d),
    trigger: DeploymentTrigger.parse(d.trigger),
    force: d.force,
    serverUuid: d.server.uuid,
    startedAt: d.startedAt?.toISOString() ?? null,
    reason: d.reason,
  };
}
