import type { Server as HttpServer } from "node:http";
import type { Express } from "express";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import { openInstanceData, type InstanceData } from "./instance-data.js";
import { createServices, type Services } from "./services/index.js";
import { createRateLimiter } from "./http/rate-limit.js";
import { createApp } from "./http/app.js";
import { JobQueue } from "./jobs/queue.js";
import { outcomeMap } from "./jobs/outcome-map.js";
import { RepairSweep } from "./jobs/repair-sweep.js";
import { attachGateway, type AgentGateway } from "./agents/gateway.js";
import { openGatewayDoor, type GatewayDoor } from "./agents/door.js";
import { joinCommand } from "./agents/join-command.js";
import { installAgentOverSsh } from "./agents/ssh-install.js";
import { usePostgresAdapter } from "./agents/cluster-adapter.js";
import { clientAddress } from "./agents/client-address.js";
import { scopeVisibility } from "./agents/fleet-visibility.js";
import { BackupScheduler } from "./backups/scheduler.js";
import { Sessions } from "./services/sessions.js";

export interface Instance extends InstanceData {
  app: Express;
  services: Services;
  jobs: JobQueue;
  gateway: AgentGateway | null;
  /** Runs the backup schedules (started by attach). */
  backupScheduler: BackupScheduler;
  /** The one repair sweep of every job type and resource (started by attach). */
  repairSweep: RepairSweep;
  /**
   * Attaches the agent gateway to the HTTP server and starts background work. `door`: the
   * socket.io server already listening there, holding handshakes until now (server.ts).
   */
  attach(http: HttpServer, door?: GatewayDoor): Promise<AgentGateway>;
  close(): Promise<void>;
}

/** Everything the control plane runs, without listening: the server and the tests share it. */
export async function createInstance(config: Config, log: Logger): Promise<Instance> {
  const data = await openInstanceData(config);
  const db = data.database.prisma;
  const jobs = new JobQueue(db, log, { box: data.box, dialect: data.database.kind, reader: data.database.reader, writer: data.database.writer });
  const agentParams = (token: string) => ({ url: config.publicUrl, image: config.agentImage, token });
  const services = createServices(db, data.database.reader, data.box, jobs, {
    joinCommand: (token) => joinCommand(config.publicUrl, config.agentImage, token),
    install: (target, token) => installAgentOverSsh(target, agentParams(token)),
    openKey: (sealed) => data.box.open(sealed),
  }, config);
  // What each job type's end means, decided once for every type (jobs/outcome-map.ts).
  jobs.useOutcomes(outcomeMap(services));
  services.deployments.scheduler.log = log;
  const repairSweep = new RepairSweep(jobs, [
    { name: "deployments", run: () => services.deployments.scheduler.repair() },
    { name: "backups", run: () => services.backups.repair() },
    // clusters (issue 20, w7/events): periodic event collection and retention
    { name: "cluster events", run: () => services.clusters.eventsSweep() },
  ], log);
  const limiter = await createRateLimiter(config.database, config.rateLimitPerMinute);
  const app = createApp({
    services,
    log,
    rateLimit: limiter.middleware,
    maxBodyBytes: config.maxBodyBytes,
    trustProxy: config.trustProxy,
    ready: async () => {
      await db.$queryRawUnsafe("SELECT 1");
    },
    session: { sessions: new Sessions(db), publicUrl: config.publicUrl, clientAddress: (req) => clientAddress(req, config.trustProxy) },
  });
  const closers: (() => Promise<void>)[] = [];
  const backupScheduler = new BackupScheduler(db, services.backups, { log });
  const instance: Instance = {
    ...data,
    app,
    services,
    jobs,
    gateway: null,
    backupScheduler,
    repairSweep,
    async attach(http, opened) {
      const door = opened ?? openGatewayDoor(http);
      // Before the gateway lets anyone in: installing an adapter gives every namespace a new
      // one, and sockets already connected would drop out of its rooms (no shutdown
      // disconnect, no fleet events for their team until they reconnect).
      if (config.database.kind === "postgresql") closers.push(await usePostgresAdapter(door.io, config.database.url));
      const gateway = await attachGateway(http, jobs, {
        door,
        db,
        reader: data.database.reader,
        writer: data.database.writer,
        dialect: data.database.kind,
        log,
        clientAddress: (req) => clientAddress(req, config.trustProxy),
        visibility: scopeVisibility(services.scope),
        clustered: config.database.kind === "postgresql",
      });
      services.servers.bindAgents(gateway);
      jobs.attachDispatcher(gateway);
      instance.gateway = gateway;
      jobs.start();
      services.templateSources.start(log);
      // w5/dns: DNS reconciles are durable jobs run by the control plane.
      services.dns.reconciler.start(log);
      repairSweep.start();
      // registries (issue 18): cloud_a tokens refreshed before they expire.
      services.registries.startTokenRefresh(log);
      await backupScheduler.start();
      return gateway;
    },
    async close() {
      await backupScheduler.stop();
      services.registries.stopTokenRefresh();
      await services.templateSources.stop();
      await services.dns.reconciler.stop();
      await repairSweep.stop();
      await services.deployments.stop();
      await jobs.stop();
      await instance.gateway?.close();
      for (const close of closers.splice(0)) await close();
      await limiter.close();
      await data.database.close();
    },
  };
  return instance;
}
