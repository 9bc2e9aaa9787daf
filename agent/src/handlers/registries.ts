import type { Engine } from "../docker/engine.js";
import type { Handler } from "../dispatch/types.js";
import { KeyedMutex } from "../mutex.js";
import { removeLogin, storeLogin } from "../registries/config.js";

/** One writer of the registry config at a time (logins of several registries may run at once). */
const CONFIG_LOCK = "registry-config";

/** A registry's reason without the password (some registries echo what they were sent). */
function masked(err: unknown, secret: string): Error {
  const message = (err as Error)?.message ?? String(err);
  return new Error(secret ? message.split(secret).join("****") : message);
}

/**
 * registry.login (issue 18): the engine logs in (POST /auth, the password in the request body:
 * no process is started, so no command line or child environment ever holds it), then the
 * login is kept in the agent's registry config (registries/config.ts). Idempotent: a second
 * delivery logs in again and rewrites the same entry.
 */
export function registryLogin(engine: Engine, opts: { stateDir: string }, locks: KeyedMutex): Handler<"registry.login"> {
  return async ({ registry, username, password, fingerprint, is_default }, { signal, progress }) => {
    let status: string;
    try {
      status = (await engine.checkAuth({ username, password, serveraddress: registry }, signal)).status;
    } catch (err) {
      throw masked(err, password);
    }
    progress(`${registry}: ${status}`);
    await locks.run(CONFIG_LOCK, () => storeLogin(opts.stateDir, registry, username, password, { fingerprint, isDefault: is_default === true }));
    progress(`${registry}: login stored`);
    return { registry, fingerprint, status };
  };
}

/** registry.logout: forgets the login (nothing to do when there is none). */
export function registryLogout(opts: { stateDir: string }, locks: KeyedMutex): Handler<"registry.logout"> {
  return async ({ registry }, { progress }) => {
    const removed = await locks.run(CONFIG_LOCK, () => removeLogin(opts.stateDir, registry));
    progress(removed ? `${registry}: login removed` : `${registry}: no login stored`);
    return { removed };
  };
}
