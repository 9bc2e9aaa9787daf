import type { DeployPayload } from "@capstan/shared";
import type { Logger } from "pino";
import type { Db, Prisma } from "../db/client.js";
import type { SqlReader } from "../db/reader.js";
import { lockInTransaction } from "../db/locks.js";
import { chunks } from "../db/chunks.js";
import type { JobQueue } from "./queue.js";
import type { BuildRegistryConfig } from "../config.js";
import { buildDeployPayload, buildPayloadOf, DeploySpecError, needsBuild, pushTarget, type DeploySpecDeps } from "../services/deploy-spec.js";
import { assertPlannedNetworksFit, NetworkLimitError, NetworkPlanGoneError, lockServersNetworks, recordPlannedNetworks, type NetworkPlanContext } from "../services/network-plan.js";

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

/** Lines the control plane writes into a deployment's log (the agents' lines have no such prefix). */
export const NOTE = "[capstan] ";

/** A started deployment whose job was not written within this time was claimed by a replica that died: it is queued again. */
const CLAIM_STALE_MS = 120_000;

export interface DeploymentServiceDeps {
  db: Db;
  reader: SqlReader;
  dialect: "sqlite" | "postgresql";
  jobs: JobQueue;
  spec: DeploySpecDeps;
  settings: DeploySchedulerSettings;
}

/**
 * The deployments' scheduler: starts queued deployments (services/deployments/commands.ts
 * writes them) when their server has a free build slot and their application has no other
 * deployment running, as an app.deploy job (or an app.build job on a build server). Starting
 * takes a per-server lock (a PostgreSQL advisory lock; on SQLite the one process's
 * transactions are serial), and every state change is a conditional update, so replicas
 * neither double-start nor lose a deployment.
 */
export class DeployScheduler {
  private readonly db: Db;
  private readonly scheduling = new Map<number, Promise<void>>();
  private readonly again = new Set<number>();
  log: Pick<Logger, "error" | "warn"> = { error: () => {}, warn: () => {} };

  constructor(private readonly deps: DeploymentServiceDeps) {
    this.db = deps.db;
  }

  get settings(): DeploySchedulerSettings {
    return this.deps.settings;
  }

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

  async lockServer(tx: Prisma.TransactionClient, serverId: number): Promise<void> {
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
  remainingMs(d: { startedAt: Date | null }): number {
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
  lockAgainstEnvironmentRemoval(tx: Prisma.TransactionClient, serverId: number): Promise<void> {
    return lockServersNetworks(tx, this.deps.dialect, [serverId]);
  }

  planCtx(db: NetworkPlanContext["db"]): NetworkPlanContext {
    return { db, network: this.deps.spec.config.network, dialect: this.deps.spec.config.dialect };
  }

  /**
   * Records the networks an app.deploy payload (built with record: false) asks its server to
   * ensure, in the transaction that writes the job: a record is pending only while a job that
   * ensures it exists (its end resolves it: services/networks/outcomes.ts).
   */
  recordNetworks(tx: Prisma.TransactionClient, serverId: number, teamId: number, payload: DeployPayload): Promise<void> {
    return recordPlannedNetworks(this.planCtx(tx), {
      teamId,
      serverId,
      specs: [...payload.run.ensure_networks, ...payload.proxy.ensure_networks],
      proxyNetworks: payload.proxy.networks,
    });
  }

  async serverName(id: number): Promise<string> {
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


  /**
   * The scheduler's step of the repair sweep (jobs/repair-sweep.ts), on every replica; what a
   * job's end means for its deployment is applied by the sweep's first step (the outcome map):
   * - deployments whose job is gone (the build server was deleted): failed;
   * - claims whose job was never written (the claiming replica died): queued again;
   * - queued deployments of a server whose agent has been away for the whole deadline: failed;
   * - servers with queued deployments: a scheduling pass (agents reconnect, slots free up elsewhere).
   */
  async repair(): Promise<void> {
    const now = Date.now();
    const open = await this.db.deployment.findMany({ where: { status: "in_progress", jobId: { not: null } }, select: { id: true, jobId: true } });
    for (const part of chunks(open)) {
      const jobs = await this.db.job.findMany({ where: { id: { in: part.map((d) => d.jobId!) } }, select: { id: true } });
      const found = new Set(jobs.map((j) => j.id));
      for (const d of part) {
        if (found.has(d.jobId!)) continue;
        await this.db.deployment.updateMany({
          where: { id: d.id, status: "in_progress", jobId: d.jobId },
          data: { status: "failed", finishedAt: new Date(), reason: "the server running its job was removed" },
        });
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

  /** Waits for the scheduling passes running in this process. */
  async stop(): Promise<void> {
    await Promise.allSettled([...this.scheduling.values()]);
  }
}

/** A deployment that was no longer bound as expected when its job was to be written: nothing was written. */
export class Unbound extends Error {}

export const limitReason = (err: NetworkLimitError) => `The application's environment network cannot be created: ${err.message}`;

/** Why a deployment's networks cannot be recorded, as its reason; null for any other error. */
export function networkFailure(err: unknown): string | null {
  if (err instanceof NetworkLimitError) return limitReason(err);
  if (err instanceof NetworkPlanGoneError) return err.message;
  return null;
}
