import type { Engine } from "../docker/engine.js";
import type { HandlerMap } from "../dispatch/types.js";
import { appAction } from "./app-action.js";
import { appBuild } from "./app-build.js";
import { appDeploy } from "./app-deploy.js";
import { appLogs } from "./app-logs.js";
import { type AppHandlerOptions, resolveAppOptions } from "./app-options.js";
import { containerEnsure, containerRemove, containersList } from "./containers.js";
import { KeyedMutex } from "./mutex.js";
import { type HandlerOptions as BaseHandlerOptions, serverPrepare, serverValidate } from "./server.js";

export type HandlerOptions = BaseHandlerOptions & AppHandlerOptions;

/** The agent's job handlers: one per job type (the HandlerMap type makes that exhaustive). */
export function createHandlers(engine: Engine, opts: HandlerOptions = {}): HandlerMap {
  const locks = new KeyedMutex();
  const app = resolveAppOptions(opts);
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
  };
}
