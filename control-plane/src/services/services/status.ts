/**
 * The one rule for a service's status (docs/services.md), from the engine statuses of its
 * components (service applications and databases) that count: those not marked
 * exclude_from_status (the catalog's exclude_from_hc: one-shot jobs, sidecars).
 *
 * - no component counts, or every counted one is exited (or absent)      -> exited
 * - every counted one is running and healthy                             -> running:healthy
 * - every counted one is running, none unhealthy, some without a health
 *   check or not yet checked                                             -> running:unknown
 * - some counted one is starting/restarting/created and none is
 *   unhealthy or exited while others run                                 -> starting
 * - anything else (one unhealthy, or some running while others are down) -> degraded
 *
 * Component statuses are the agent's composite strings (`running:healthy`, `exited:0`, ...).
 */
export type ServiceStatus = "exited" | "running:healthy" | "running:unknown" | "starting" | "degraded";

export function aggregateServiceStatus(components: readonly { status: string; excludeFromStatus: boolean }[]): ServiceStatus {
  const counted = components.filter((c) => !c.excludeFromStatus).map((c) => c.status.toLowerCase());
  if (counted.length === 0) return "exited";
  const state = (s: string) => s.split(":")[0] ?? "";
  const health = (s: string) => s.split(":")[1] ?? "";
  const down = counted.filter((s) => ["exited", "dead", "removed", "missing", "", "stopped"].includes(state(s)));
  if (down.length === counted.length) return "exited";
  if (counted.some((s) => health(s) === "unhealthy")) return "degraded";
  const running = counted.filter((s) => state(s) === "running");
  if (running.length === counted.length) return running.every((s) => health(s) === "healthy") ? "running:healthy" : "running:unknown";
  if (down.length > 0) return "degraded";
  return "starting";
}
