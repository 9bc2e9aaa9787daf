/** What every network operation gets from its caller (a job handler, a deployment step). */
export interface NetworkCtx {
  signal: AbortSignal;
  progress(line: string): void;
  /** The agent's CAPSTAN_AGENT_LABELS (tests: capstan.test=1): on every network it creates, never over the platform's own. */
  extraLabels?: Record<string, string>;
}

/**
 * The networks of one resource container (an application's run, a database): DeployPayload.run
 * and DbDeployPayload have exactly these fields.
 */
export interface ResourceNetworks {
  /** Primary network: the container is created on it. */
  network: string;
  /** Further networks it joins. */
  networks?: readonly string[];
  /** Networks created first when missing. */
  ensure_networks?: readonly import("@capstan/shared").NetworkSpec[];
}
