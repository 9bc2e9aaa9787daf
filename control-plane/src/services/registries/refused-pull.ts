/**
 * The registry (host[:port]) of a failed pull the registry refused for want of a valid login,
 * from a job's reason; null for any other failure. One reading for every pull the agent makes:
 *   - the engine's own pulls (application images, database images, base images of builds):
 *     "pull image HOST/...: <the registry's reason>" (agent/src/docker/dockerode-engine.ts);
 *   - compose's pulls (services): the daemon's `Head "https://HOST/v2/...": <reason>` in the
 *     last line compose printed (agent/src/deploy/compose.ts).
 * A refusal is a 401, "unauthorized", "no basic auth credentials" or "authentication required".
 */
const REFUSED = /\b401\b|unauthorized|no basic auth credentials|authentication required/i;

export function refusedPullRegistry(reason: string): string | null {
  const engine = /pull image ([^\s:/]+(?::\d+)?)\/\S+: (.*)$/m.exec(reason);
  if (engine) return REFUSED.test(engine[2]!) ? engine[1]! : null;
  const daemon = /"https?:\/\/([^\s"/]+)\/v2\/[^"]*": (.*)$/m.exec(reason);
  if (daemon) return REFUSED.test(daemon[2]!) ? daemon[1]! : null;
  return null;
}
