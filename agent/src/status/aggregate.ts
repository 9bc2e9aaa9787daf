import {
  LABEL_DEPLOYMENT,
  LABEL_RESOURCE_TYPE,
  LABEL_RESOURCE_UUID,
  LABEL_ROLLOUT,
  LABEL_SERVICE_COMPONENT,
  RESOURCE_TYPE_SERVICE_COMPONENT,
  type ResourceStatus,
} from "@capstan/shared";
import { containerStatus } from "../docker/status.js";

/** What status needs of one container: its platform labels and engine state. */
export interface ContainerState {
  name: string;
  state: string;
  running: boolean;
  /** healthy | unhealthy | starting, or null without a health check */
  health: string | null;
  labels: Record<string, string>;
}

const L = { uuid: LABEL_RESOURCE_UUID, type: LABEL_RESOURCE_TYPE, deployment: LABEL_DEPLOYMENT, rollout: LABEL_ROLLOUT } as const;

const rollout = (c: ContainerState) => Number(c.labels[L.rollout] ?? 0) || 0;
const serving = (c: ContainerState) => c.running && (c.health === null || c.health === "healthy");

/**
 * A resource's status is that of the deployment users are served by: the one whose newest
 * running, healthy (or unchecked) container the proxy routes to. During a rollout the new,
 * still-starting container therefore does not make the app look unhealthy; with nothing
 * serving, the newest deployment's containers tell what is wrong.
 */
export function resourceStatus(containers: ContainerState[]): string {
  if (containers.length === 0) return "exited";
  const byRollout = [...containers].sort((a, b) => rollout(b) - rollout(a) || b.name.localeCompare(a.name));
  const current = byRollout.find(serving) ?? byRollout[0]!;
  const deployment = current.labels[L.deployment];
  const group = deployment ? containers.filter((c) => c.labels[L.deployment] === deployment) : [current];
  if (group.length === 1) return containerStatus(group[0]!.state, group[0]!.health);
  // Several containers of one deployment (compose): running only when all are.
  const running = group.filter((c) => c.running).length;
  const state = running === group.length ? "running" : running === 0 ? (group.some((c) => c.state === "restarting") ? "restarting" : "exited") : "degraded";
  const healths = group.map((c) => c.health);
  const health = healths.includes("unhealthy")
    ? "unhealthy"
    : healths.includes("starting")
      ? "starting"
      : healths.includes("healthy")
        ? "healthy"
        : "unknown";
  return `${state}:${health}`;
}

/** Groups containers by resource and computes each resource's status. */
export function resourceStatuses(containers: ContainerState[]): ResourceStatus[] {
  const groups = new Map<string, { type: string; list: ContainerState[] }>();
  for (const c of containers) {
    const uuid = c.labels[L.uuid];
    if (!uuid) continue;
    const g = groups.get(uuid) ?? { type: c.labels[L.type] ?? "application", list: [] };
    g.list.push(c);
    groups.set(uuid, g);
  }
  const out: ResourceStatus[] = [...groups].map(([uuid, g]) => ({ uuid, type: g.type, status: resourceStatus(g.list) }));
  // A service's components (issue 17) each have their own status: one entry per component
  // container; the control plane derives the service's status from them (one rule).
  for (const c of containers) {
    const component = c.labels[LABEL_SERVICE_COMPONENT];
    if (component && c.labels[L.uuid]) out.push({ uuid: component, type: RESOURCE_TYPE_SERVICE_COMPONENT, status: containerStatus(c.state, c.health) });
  }
  return out;
}
