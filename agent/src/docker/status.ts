/**
 * The composite status the API shows for a container: `<engine state>:<health>`, e.g.
 * running:healthy, running:starting, exited:unhealthy, and `:unknown` when the container has
 * no health check (running:unknown, exited:unknown).
 */
export const HEALTH_VALUES = ["healthy", "unhealthy", "starting"] as const;

export function containerStatus(state: string, health: string | null | undefined): string {
  const s = (state || "unknown").toLowerCase();
  const h = (health ?? "").toLowerCase();
  return `${s}:${(HEALTH_VALUES as readonly string[]).includes(h) ? h : "unknown"}`;
}
