import type { Engine } from "./engine.js";
import { errorMessage, type Logger } from "../log.js";

/**
 * Whether this agent has a Docker Engine to drive. A machine without one (a newcomer's laptop
 * running `npm start`) used to log `connect ENOENT /var/run/docker.sock` over and over while the
 * server silently stayed unusable. The watch probes the engine, says once and clearly what is
 * missing and how to get it, retries with an exponential, capped backoff, says once when the
 * engine answers again, and tells the agent (facts, quieter logs) in between.
 */

export interface EngineWatchOptions {
  /** First retry after a failed probe; doubles up to maxDelayMs. */
  minDelayMs?: number;
  maxDelayMs?: number;
  /** Probe interval while the engine answers (to notice it going away). */
  upIntervalMs?: number;
  /** Bound of one probe. */
  probeTimeoutMs?: number;
}

export const ENGINE_WATCH_DEFAULTS = { minDelayMs: 1_000, maxDelayMs: 60_000, upIntervalMs: 30_000, probeTimeoutMs: 10_000 } as const;

export type EngineState = { up: true; version: string } | { up: false; reason: string } | { up: null };

/** What to do about an engine that does not answer, by the socket error's code (the reason's first line stays the engine error). */
export function engineHint(code: string | null | undefined): string {
  switch (code) {
    case "ENOENT":
      return (
        "no Docker Engine listens there. Capstan runs applications on a Docker Engine: install one and start it " +
        "(Debian/Ubuntu: apt-get install docker.io; others: https://docs.docker.com/engine/install/), " +
        "or point DOCKER_HOST (unix:///path/to/docker.sock) at one"
      );
    case "ECONNREFUSED":
      return "the socket exists but no engine accepts connections: start the Docker Engine (e.g. systemctl start docker), or point DOCKER_HOST at a running one";
    case "EACCES":
      return "this agent may not use the socket: run it as root or as a member of the docker group";
    default:
      return "check that the Docker Engine runs, or point DOCKER_HOST at one";
  }
}

export class EngineWatch {
  private current: EngineState = { up: null };
  private delay: number;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly o: Required<EngineWatchOptions>;
  /** Delays of the retries scheduled so far while down (tests read the backoff from it). */
  readonly retryDelays: number[] = [];

  constructor(
    private readonly engine: Pick<Engine, "version" | "socketPath">,
    private readonly log: Logger,
    private readonly onChange: (state: EngineState) => void = () => {},
    opts: EngineWatchOptions = {},
  ) {
    this.o = { ...ENGINE_WATCH_DEFAULTS, ...opts };
    this.delay = this.o.minDelayMs;
  }

  get state(): EngineState {
    return this.current;
  }

  /** True unless the last probe failed (unknown counts as up: nothing to be quiet about yet). */
  get up(): boolean {
    return this.current.up !== false;
  }

  start(): void {
    void this.probe();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** One probe now; resolves with the state it found (tests drive it directly). */
  async probe(): Promise<EngineState> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    let next: EngineState;
    try {
      const v = await this.engine.version(AbortSignal.timeout(this.o.probeTimeoutMs));
      next = { up: true, version: v.version };
    } catch (err) {
      const code = (err as { code?: string | null }).code ?? null;
      next = { up: false, reason: `${errorMessage(err)}: ${engineHint(code)}.` };
    }
    const before = this.current;
    this.current = next;
    if (next.up) {
      if (before.up === false) this.log.info("the Docker Engine answers again", { socket: this.engine.socketPath, version: next.version });
      this.delay = this.o.minDelayMs;
      this.retryDelays.length = 0;
    } else if (before.up !== false || before.reason !== next.reason) {
      // Once per outage (and again only if the reason changes): the retries below stay quiet.
      this.log.error(`no usable Docker Engine: ${next.reason} Retrying with backoff (up to every ${Math.round(this.o.maxDelayMs / 1000)} s).`, {
        socket: this.engine.socketPath,
      });
    } else {
      this.log.debug("the Docker Engine still does not answer", { socket: this.engine.socketPath });
    }
    if (before.up !== next.up || (!next.up && before.up === false && before.reason !== next.reason)) this.onChange(next);
    if (!this.stopped) {
      const wait = next.up ? this.o.upIntervalMs : this.delay;
      if (!next.up) {
        this.retryDelays.push(wait);
        this.delay = Math.min(this.o.maxDelayMs, this.delay * 2);
      }
      this.timer = setTimeout(() => void this.probe(), wait);
      this.timer.unref();
    }
    return next;
  }
}

/** A logger whose warnings are debug lines while the engine is down (the watch already said why). */
export function quietWhileDown(log: Logger, watch: { up: boolean }): Logger {
  return {
    error: (msg, fields) => log.error(msg, fields),
    warn: (msg, fields) => (watch.up ? log.warn(msg, fields) : log.debug(msg, fields)),
    info: (msg, fields) => log.info(msg, fields),
    debug: (msg, fields) => log.debug(msg, fields),
    child: (fields) => quietWhileDown(log.child(fields), watch),
  };
}
