import { z } from "zod";
import { AppActionPayload, AppActionResult, AppLogsPayload, AppLogsResult, BuildPayload, BuildResult, DeployPayload, DeployResult } from "./deploy.js";

import { DockerName } from "./names.js";
import { DbActionPayload, DbActionResult, DbDeployPayload, DbDeployResult } from "./databases.js";
import { DbBackupPayload, DbBackupResult, DbRestorePayload, DbRestoreResult, BackupDeletePayload, BackupDeleteResult, ResourceBackupPayload, ResourceBackupResult, ResourceRestorePayload, ResourceRestoreResult } from "./backups.js";
import { EngineNetwork, NetworkSpec } from "./networks.js";
// registries (issue 18)
import { RegistryLoginPayload, RegistryLoginResult, RegistryLogoutPayload, RegistryLogoutResult } from "./registries.js";
// services lifecycle (issue 17)
import { ServiceActionPayload, ServiceActionResult, ServiceDeployPayload, ServiceDeployResult } from "./services.js";
// clusters (issue 20)
import { SwarmInfoResult, SwarmNode, SwarmNodeUpdatePayload, SwarmNodeUpdateResult, SwarmObjectCreatePayload, SwarmObjectCreateResult, SwarmObjectDeletePayload, SwarmObjectDeleteResult, SwarmObjectsPayload, SwarmObjectsResult, SwarmEventsPayload, SwarmEventsResult, SwarmServiceScalePayload, SwarmServiceScaleResult, SwarmServicesResult, SwarmTasksPayload, SwarmTasksResult } from "./swarm.js";

export { DockerName };
const LabelMap = z.record(z.string().regex(/^[a-z0-9][a-z0-9._-]{0,127}$/), z.string().max(4096));

export const ContainerSpec = z.object({
  name: DockerName,
  image: z.string().min(1).max(512),
  cmd: z.array(z.string().max(4096)).max(256).optional(),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()).optional(),
  labels: LabelMap.default({}),
  network: DockerName.optional(),
  restart: z.enum(["no", "unless-stopped", "always", "on-failure"]).default("unless-stopped"),
});
export type ContainerSpec = z.infer<typeof ContainerSpec>;

export const ManagedContainer = z.object({
  id: z.string(),
  name: z.string(),
  image: z.string(),
  /** composite status as the API shows it: running:healthy, exited:unhealthy, ... */
  status: z.string(),
  labels: z.record(z.string(), z.string()),
});
export type ManagedContainer = z.infer<typeof ManagedContainer>;

/**
 * Every job an agent runs: its payload and its result. The agent's handler map is keyed by
 * this object, so adding a job type without a handler does not compile.
 */
export const JOBS = {
  /** Engine reachable, running, compose available: what makes a server usable. */
  "server.validate": {
    payload: z.object({}),
    result: z.object({
      docker_version: z.string(),
      api_version: z.string(),
      compose_version: z.string().nullable(),
    }),
  },
  /** Creates the server's platform networks (idempotent: by name). */
  "server.prepare": {
    payload: z.object({ networks: z.array(DockerName).min(1).max(32) }),
    result: z.object({ created: z.array(z.string()), existing: z.array(z.string()) }),
  },
  /** Containers carrying the platform's labels, with their engine status. */
  "containers.list": {
    payload: z.object({}),
    result: z.object({ containers: z.array(ManagedContainer) }),
  },
  /** Runs a container unless one with that name exists; returns the one that runs. */
  "container.ensure": {
    payload: ContainerSpec,
    result: z.object({ id: z.string(), created: z.boolean() }),
  },
  "container.remove": {
    payload: z.object({ name: DockerName }),
    result: z.object({ removed: z.boolean() }),
  },
  /**
   * Builds (or pulls) and rolls out one deployment of an application, then points the proxy
   * at it. Cancel (the job's signal) stops the build or rollout; the old container keeps serving.
   */
  "app.deploy": { payload: DeployPayload, result: DeployResult },
  /**
   * Builds a deployment's image on a build server and pushes it to the instance's registry
   * (then the application's server runs app.deploy with that image). Cancel stops the build or push.
   */
  "app.build": { payload: BuildPayload, result: BuildResult },
  /** start / stop / restart / remove of an application's containers, then a proxy sync. */
  "app.action": { payload: AppActionPayload, result: AppActionResult },
  /** Recent log lines of the application's serving container. */
  "app.logs": { payload: AppLogsPayload, result: AppLogsResult },
  /** (Re)creates a standalone database's container in place and waits for its health check. */
  "db.deploy": { payload: DbDeployPayload, result: DbDeployResult },
  /** start / stop / restart / remove of a database's container. */
  "db.action": { payload: DbActionPayload, result: DbActionResult },
  /** Dumps a database with its engine's tool, streamed: compress, optionally encrypt, keep locally, upload, retention. */
  "db.backup": { payload: DbBackupPayload, result: DbBackupResult },
  /** Restores one backup file (local or from S3, decrypting as needed) into the database. */
  "db.restore": { payload: DbRestorePayload, result: DbRestoreResult },
  /** Deletes one backup's file on the server and its object in S3. */
  "backup.delete": { payload: BackupDeletePayload, result: BackupDeleteResult },
  /** Creates the networks when missing (idempotent by name). */
  "network.ensure": { payload: z.object({ networks: z.array(NetworkSpec).min(1).max(64) }), result: z.object({ networks: z.array(EngineNetwork) }) },
  /** Removes a network, disconnecting every container on it first. */
  "network.remove": { payload: z.object({ name: DockerName }), result: z.object({ removed: z.boolean(), disconnected: z.array(z.string()) }) },
  /** Every network on the engine, with its containers (sync, detail). */
  "networks.list": { payload: z.object({ names: z.array(DockerName).max(1000).optional() }), result: z.object({ networks: z.array(EngineNetwork) }) },
  /** Connects / disconnects containers to / from a network (proxy migrate and cleanup). */
  "network.connect": {
    payload: z.object({ network: DockerName, containers: z.array(DockerName).max(1000), disconnect: z.boolean().default(false) }),
    result: z.object({ changed: z.array(z.string()) }),
  },
  // registries (issue 18)
  /** Logs the server in to a registry (checked by the engine) and keeps the login for its pulls. */
  "registry.login": { payload: RegistryLoginPayload, result: RegistryLoginResult },
  /** Forgets a registry's login on the server (a registry deleted or unassigned). */
  "registry.logout": { payload: RegistryLogoutPayload, result: RegistryLogoutResult },
  // services lifecycle (issue 17)
  /** Runs a service's rewritten compose file (compose up, pull first when asked), then syncs the proxy. */
  "service.deploy": { payload: ServiceDeployPayload, result: ServiceDeployResult },
  /** stop / remove of a service's containers (remove: network, routes, volumes when asked), then a proxy sync. */
  "service.action": { payload: ServiceActionPayload, result: ServiceActionResult },
  // clusters (issue 20)
  /** The engine's swarm membership (GET /info, GET /swarm) and, on a manager, every node (GET /nodes). */
  "swarm.info": { payload: z.object({}), result: SwarmInfoResult },
  /** Every node of the swarm (a manager only). */
  "swarm.nodes": { payload: z.object({}), result: z.object({ nodes: z.array(SwarmNode).max(10_000) }) },
  /** Changes one node (availability, role, labels) with its version index; refuses what loses quorum. */
  "swarm.node.update": { payload: SwarmNodeUpdatePayload, result: SwarmNodeUpdateResult },
  // resource backups (issue 19)
  /** Streams a resource's volumes as one tar (with a manifest), gzip, optionally encrypted; keep locally, upload, retention. */
  "resource.backup": { payload: ResourceBackupPayload, result: ResourceBackupResult },
  // ---- swarm services (issue 20) ----
  /** Every service of the swarm with its running task count (a manager only). */
  "swarm.services": { payload: z.object({}), result: SwarmServicesResult },
  /** One service's tasks (GET /tasks filtered by service). */
  "swarm.tasks": { payload: SwarmTasksPayload, result: SwarmTasksResult },
  /** Sets a replicated service's replicas with its version index (one retry after out of sequence); refuses global mode. */
  "swarm.service.scale": { payload: SwarmServiceScalePayload, result: SwarmServiceScaleResult },
  // ---- swarm secrets and configs (issue 20, w7) ----
  /** Every secret or config of the swarm (GET /secrets, GET /configs); a secret's data is never read. */
  "swarm.objects": { payload: SwarmObjectsPayload, result: SwarmObjectsResult },
  /** Creates a secret or config; its data is in this payload only (sealed at rest), never in the result or the log. */
  "swarm.object.create": { payload: SwarmObjectCreatePayload, result: SwarmObjectCreateResult },
  /** Removes a secret or config unless a service mounts it (in_use with the services' names). */
  "swarm.object.delete": { payload: SwarmObjectDeletePayload, result: SwarmObjectDeleteResult },
  // ---- resource restores (issue 19, w7/restore) ----
  /** Restores a volume backup into the resource's volumes: checked in staging first, then stop, swap, start again. */
  "resource.restore": { payload: ResourceRestorePayload, result: ResourceRestoreResult },
  // ---- swarm events (issue 20, w7/events) ----
  /** The engine's node, service, secret and config events from since_nano to now (a finite GET /events?since&until). */
  "swarm.events": { payload: SwarmEventsPayload, result: SwarmEventsResult },
} as const;

export type JobType = keyof typeof JOBS;
export const JOB_TYPES = Object.keys(JOBS) as JobType[];
export type JobPayload<T extends JobType> = z.output<(typeof JOBS)[T]["payload"]>;
export type JobResult<T extends JobType> = z.output<(typeof JOBS)[T]["result"]>;
export const JobTypeSchema = z.enum(JOB_TYPES as [JobType, ...JobType[]]);
