import type { Engine } from "../docker/engine.js";
import type { HandlerMap } from "../dispatch/types.js";
import { containerEnsure, containerRemove, containersList } from "./containers.js";
import { KeyedMutex } from "./mutex.js";
import { type HandlerOptions, serverPrepare, serverValidate } from "./server.js";

export type { HandlerOptions };

/** The agent's job handlers: one per job type (the HandlerMap type makes that exhaustive). */
export function createHandlers(engine: Engine, opts: HandlerOptions = {}): HandlerMap {
  const locks = new KeyedMutex();
  return {
    "server.validate": serverValidate(engine),
    "server.prepare": serverPrepare(engine, opts, locks),
    "containers.list": containersList(engine),
    "container.ensure": containerEnsure(engine, opts, locks),
    "container.remove": containerRemove(engine, locks),
  };
}
