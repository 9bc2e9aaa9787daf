import { type DeployDeps, defaultDeps } from "../deploy/deps.js";
import { DEFAULT_TIMING, type RolloutTiming } from "../deploy/rollout.js";
import type { ProxyOptions } from "../proxy/index.js";

/** Options of the app.* handlers (besides HandlerOptions.extraLabels). */
export interface AppHandlerOptions {
  /** The agent's state dir: deployments clone and build in private dirs under it. */
  stateDir?: string;
  /** Replacements for the proxy, git, builder and compose steps (unit tests). */
  deps?: Partial<DeployDeps>;
  timing?: Partial<RolloutTiming>;
  /** Proxy knobs (tests: a proxy of their own); its labels default to extraLabels. */
  proxy?: ProxyOptions;
}

export interface ResolvedAppOptions {
  stateDir: string;
  extraLabels: Record<string, string>;
  deps: DeployDeps;
  timing: RolloutTiming;
}

export const DEFAULT_STATE_DIR = "/var/lib/capstan-agent";

export function resolveAppOptions(opts: AppHandlerOptions & { extraLabels?: Record<string, string> }): ResolvedAppOptions {
  return {
    stateDir: opts.stateDir ?? DEFAULT_STATE_DIR,
    extraLabels: opts.extraLabels ?? {},
    deps: { ...defaultDeps({ ...opts.proxy, labels: { ...opts.extraLabels, ...opts.proxy?.labels } }), ...opts.deps },
    timing: { ...DEFAULT_TIMING, ...opts.timing },
  };
}
