import type { Engine } from "../docker/engine.js";
import type { HandlerMap } from "../dispatch/types.js";
import { appAction } from "./app-action.js";
import { appBuild } from "./app-build.js";
import { appDeploy } from "./app-deploy.js";
import { appLogs } from "./app-logs.js";
import { type AppHandlerOptions, resolveAppOptions } from "./app-options.js";
import { containerEnsure, containerRemove, containersList } from "./containers.js";
import { KeyedMutex } from "../mutex.js";
import { dbAction, dbDeploy, type DbHandlerOptions, resolveDbOptions } from "./db.js";
import { backupDelete, dbBackup, dbRestore, resourceBackup, resourceRestore } from "./backup.js";
import { networkConnect, networkEnsure, networkRemove, networksList } from "./networks.js";
import { type HandlerOptions as BaseHandlerOptions, serverPrepare, serverValidate } from "./server.js";
// registries (issue 18)
import { registryLogin, registryLogout } from "./registries.js";
// services lifecycle (issue 17)
import { serviceAction, serviceDeploy } from "./services.js";
// clusters (issue 20)
import { swarmInfo, swarmNodeUpdate, swarmNodes, swarmObjectCreate, swarmObjectDelete, swarmObjects, swarmEvents, swarmServiceScale, swarmServices, swarmTasks } from "./swarm.js";

export type HandlerOptions = BaseHandlerOptions & AppHandlerOptions & DbHandlerOptions & {
  /** (resource restores, w7/restore) the image of resource.restore's helper container (the agent's own; null: none) */
  helperImage?: () => Promise<string | null>;
};

/** The agent's job handlers: one per job type (the HandlerMap type makes that exhaustive). */
export function createHandlers(engine: Engine, opts: HandlerOptions = {}): HandlerMap {
  const locks = new KeyedMutex();
  const app = resolveAppOptions(opts);
  const db = { ...resolveDbOptions(opts), stateDir: app.stateDir };
  const backup = { stateDir: app.stateDir, pollMs: db.pollMs };
  return {
    "server.validate": serverValidate(engine),
    "server.prepare": serverPrepare(engine, opts, locks),
    "containers.list": containersList(engine),
    "container.ensure": containerEnsure(engine, opts, locks),
    "container.remove": containerRemove(engine, locks),
    "app.deploy": appDeploy(engine, app, locks),
    "app.build": appBuild(engine, app),
    "app.action": appAction(engine, app, locks),
    "app.logs": appLogs(engine),
    "db.deploy": dbDeploy(engine, db, locks),
    "db.action": dbAction(engine, db, locks),
    "db.backup": dbBackup(engine, backup, locks),
    "db.restore": dbRestore(engine, backup, locks),
    "backup.delete": backupDelete(engine, backup),
    "network.ensure": networkEnsure(engine, opts),
    "network.remove": networkRemove(engine),
    "networks.list": networksList(engine),
    "network.connect": networkConnect(engine),
    // registries (issue 18)
    "registry.login": registryLogin(engine, { stateDir: app.stateDir }, locks),
    "registry.logout": registryLogout({ stateDir: app.stateDir }, locks),
    // services lifecycle (issue 17)
    "service.deploy": serviceDeploy(engine, app, locks),
    "service.action": serviceAction(engine, app, locks),
    // clusters (issue 20)
    "swarm.info": swarmInfo(engine),
    "swarm.nodes": swarmNodes(engine),
    "swarm.node.update": swarmNodeUpdate(engine),
    // resource backups (issue 19)
    "resource.backup": resourceBackup(engine, backup, locks),
    // ---- swarm services (issue 20) ----
    "swarm.services": swarmServices(engine),
    "swarm.tasks": swarmTasks(engine),
    "swarm.service.scale": swarmServiceScale(engine, { stateDir: app.stateDir }),
    // ---- swarm secrets and configs (issue 20, w7) ----
    "swarm.objects": swarmObjects(engine),
    "swarm.object.create": swarmObjectCreate(engine),
    "swarm.object.delete": swarmObjectDelete(engine),
    // ---- resource restores (issue 19, w7/restore) ----
    "resource.restore": resourceRestore(engine, { ...backup, helperImage: opts.helperImage, extraLabels: opts.extraLabels }, locks),
    // ---- swarm events (issue 20, w7/events) ----
    "swarm.events": swarmEvents(engine),
  };
}
