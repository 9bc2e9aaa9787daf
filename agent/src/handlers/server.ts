import { MANAGED } from "@capstan/shared";
import type { Engine } from "../docker/engine.js";
import { isConflict } from "../docker/engine.js";
import type { Handler } from "../dispatch/types.js";
import { KeyedMutex } from "../mutex.js";

export interface HandlerOptions {
  /** Extra labels on everything the handlers create (tests: capstan.test=1). */
  extraLabels?: Record<string, string>;
}

/** Engine reachable and answering: its version, API version and compose plugin version. */
export function serverValidate(engine: Engine): Handler<"server.validate"> {
  return async (_payload, { signal, progress }) => {
    await engine.ping(signal);
    const v = await engine.version(signal);
    const compose = await engine.composeVersion(signal);
    progress(`Docker Engine ${v.version} (API ${v.apiVersion}), compose ${compose ?? "not installed"}`);
    return { docker_version: v.version, api_version: v.apiVersion, compose_version: compose };
  };
}

/**
 * Makes sure each platform network exists. Check before acting, by exact name (the engine
 * allows duplicate names, and its name filter matches substrings); creation is serialised per
 * name inside this agent, and a 409 from the engine counts as "exists".
 */
export function serverPrepare(engine: Engine, opts: HandlerOptions = {}, locks = new KeyedMutex()): Handler<"server.prepare"> {
  return async ({ networks }, { signal, progress }) => {
    const created: string[] = [];
    const existing: string[] = [];
    for (const name of [...new Set(networks)]) {
      signal.throwIfAborted();
      await locks.run(`network:${name}`, async () => {
        const found = await engine.listNetworks(name, signal);
        if (found.length > 0) {
          existing.push(name);
          progress(`network ${name} exists`);
          return;
        }
        try {
          await engine.createNetwork({ name, driver: "bridge", labels: { ...opts.extraLabels, ...MANAGED } }, signal);
          created.push(name);
          progress(`network ${name} created`);
        } catch (err) {
          if (!isConflict(err) || (await engine.listNetworks(name, signal)).length === 0) throw err;
          existing.push(name);
          progress(`network ${name} exists`);
        }
      });
    }
    return { created, existing };
  };
}
