import type { Engine } from "../docker/engine.js";
import type { Handler } from "../dispatch/types.js";
import { appContainers, servingContainer } from "../deploy/app-containers.js";
import { createMasker } from "../deploy/mask.js";

/** Bounds on what one app.logs result carries (it travels in one socket.io message). */
export const LOGS_MAX_BYTES = 1024 * 1024;
export const LOGS_MAX_LINE_CHARS = 8192;

/**
 * app.logs: the newest lines of the serving container (the newest running one by rollout,
 * else the newest), stdout and stderr interleaved, each with the engine's timestamp. The
 * resource's secrets the payload names are masked in every line, before a long line is cut
 * (so no part of a secret is left at the cut).
 */
export function appLogs(engine: Engine, now: () => number = Date.now): Handler<"app.logs"> {
  return async (payload, { signal }) => {
    const c = servingContainer(await appContainers(engine, payload.app.uuid, signal));
    if (!c) return { container: null, lines: [], truncated: false };
    const since = payload.since_s > 0 ? Math.max(1, Math.floor(now() / 1000) - payload.since_s) : 0;
    const res = await engine.containerLogs(c.id, { since, tail: payload.tail, timestamps: true, maxBytes: LOGS_MAX_BYTES }, signal);
    let truncated = res.truncated;
    const mask = createMasker(payload.secrets ?? []);
    const lines = res.lines.slice(-payload.tail).map((raw) => {
      const l = mask(raw);
      if (l.length <= LOGS_MAX_LINE_CHARS) return l;
      truncated = true;
      return `${l.slice(0, LOGS_MAX_LINE_CHARS - 1)}…`;
    });
    if (res.lines.length > payload.tail) truncated = true;
    return { container: c.name, lines, truncated };
  };
}
