import type { Services } from "../services/index.js";
import { networkRemovalEnded } from "../services/network-removal.js";
import { inTurn, type OutcomeMap } from "./outcomes.js";

/**
 * What the end of each job type means, for every type in JOBS (shared/src/protocol/jobs.ts),
 * wired once at start (instance.ts). null: nothing to apply (the caller waits for the answer,
 * as for listings and validations, or the job's end changes no record). Where two rules apply,
 * they run in the order listed (the networks' records first, as the network a deployment
 * created is active before the deployment reads as finished).
 */
export function outcomeMap(services: Services): OutcomeMap {
  const { applications, backups, databases, deployments, networks, registries } = services;
  // A deployment, an action's proxy sync or a database job that succeeded created the networks it was asked to ensure.
  const resourceNetworks = (job: Parameters<typeof networks.outcomes.afterResourceJob>[0]) => networks.outcomes.afterResourceJob(job);
  // registries (issue 18): every job that pulls images; a pull the registry refused (401) refreshes a cloud_a token at once.
  const refusedPull = async (job: Parameters<typeof registries.pullJobEnded>[0]): Promise<void> => {
    await registries.pullJobEnded(job);
  };
  return {
    "server.validate": null,
    "server.prepare": null,
    "containers.list": null,
    "container.ensure": null,
    "container.remove": null,
    "app.deploy": inTurn(resourceNetworks, (job) => deployments.outcomes.jobEnded(job), refusedPull),
    "app.build": inTurn((job) => deployments.outcomes.jobEnded(job), refusedPull),
    "app.action": inTurn(resourceNetworks, (job) => applications.actionEnded(job), refusedPull),
    "app.logs": null,
    "db.deploy": inTurn(resourceNetworks, (job) => databases.deployEnded(job), refusedPull),
    "db.action": inTurn(resourceNetworks, (job) => databases.actionEnded(job), refusedPull),
    "db.backup": (job) => backups.applyBackupEnd(job),
    "db.restore": (job) => backups.applyRestoreEnd(job),
    "backup.delete": (job) => backups.deleteEnded(job),
    "network.ensure": (job) => networks.outcomes.afterEnsure(job),
    "network.remove": inTurn((job) => networks.outcomes.afterRemove(job), networkRemovalEnded(services.db)),
    "networks.list": null,
    "network.connect": null,
    // registries (issue 18)
    "registry.login": (job) => services.registries.loginEnded(job),
    "registry.logout": null,
    // services lifecycle (issue 17): the networks a start (or an action's proxy sync) created, then the components' statuses
    "service.deploy": inTurn(resourceNetworks, (job) => services.services.jobEnded(job), refusedPull),
    "service.action": inTurn(resourceNetworks, (job) => services.services.jobEnded(job), refusedPull),
    // clusters (issue 20): the caller waits for each answer
    "swarm.info": null,
    "swarm.nodes": null,
    "swarm.node.update": null,
    // resource backups (issue 19): the same executions as db.backup's
    "resource.backup": (job) => backups.applyBackupEnd(job),
    // ---- swarm services (issue 20): the caller waits for each answer ----
    "swarm.services": null,
    "swarm.tasks": null,
    "swarm.service.scale": null,
    // ---- swarm secrets and configs (issue 20, w7): the caller waits for each answer ----
    "swarm.objects": null,
    "swarm.object.create": null,
    "swarm.object.delete": null,
    // ---- resource restores (issue 19, w7/restore): the execution's restore fields, as db.restore's ----
    // (w8/rbconfig) configuration and full restores: the document the job hands back is applied first
    "resource.restore": (job) => backups.applyResourceRestoreEnd(job),
    // ---- swarm events (issue 20, w7/events): the events stored once per cluster ----
    "swarm.events": (job) => services.clusters.eventsEnded(job),
  };
}
