import { LABEL_MANAGED, LABEL_RESOURCE_UUID, LABEL_ROLLOUT } from "@capstan/shared";
import type { ContainerSummary, Engine } from "../docker/engine.js";
import { containerStatus } from "../docker/status.js";

/** Every platform-managed container of one application (any state, compose services too). */
export async function appContainers(engine: Engine, appUuid: string, signal?: AbortSignal): Promise<ContainerSummary[]> {
  const list = await engine.listContainers({ [LABEL_RESOURCE_UUID]: appUuid }, signal);
  return list.filter((c) => c.labels[LABEL_MANAGED] === "true" && c.labels[LABEL_RESOURCE_UUID] === appUuid);
}

export const rolloutOf = (c: { labels: Record<string, string> }): number => {
  const n = Number(c.labels[LABEL_ROLLOUT]);
  return Number.isFinite(n) ? n : 0;
};

/** Newest rollout first; ties by name so the order is stable. */
export function newestFirst<T extends { name: string; labels: Record<string, string> }>(list: T[]): T[] {
  return [...list].sort((a, b) => rolloutOf(b) - rolloutOf(a) || a.name.localeCompare(b.name));
}

/** The containers of the newest rollout (one, or a compose project's services). */
export function latestRollout<T extends { name: string; labels: Record<string, string> }>(list: T[]): T[] {
  const sorted = newestFirst(list);
  if (sorted.length === 0) return [];
  const top = rolloutOf(sorted[0]!);
  return sorted.filter((c) => rolloutOf(c) === top);
}

/** The container an app's traffic and logs come from: the newest running one, else the newest. */
export function servingContainer(list: ContainerSummary[]): ContainerSummary | null {
  const sorted = newestFirst(list);
  return sorted.find((c) => c.state === "running") ?? sorted[0] ?? null;
}

/**
 * One status for an app made of one or more containers: the first that is not running, else
 * the first unhealthy, else the first still starting, else the first.
 */
export function aggregateStatus(statuses: { state: string; health: string | null }[]): string {
  if (statuses.length === 0) return "exited";
  const pick =
    statuses.find((s) => s.state !== "running") ??
    statuses.find((s) => s.health === "unhealthy") ??
    statuses.find((s) => s.health === "starting") ??
    statuses[0]!;
  return containerStatus(pick.state, pick.health);
}
