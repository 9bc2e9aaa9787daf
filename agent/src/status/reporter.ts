import { LABEL_RESOURCE_TYPE, LABEL_RESOURCE_UUID, MANAGED, type ResourceStatusReport } from "@capstan/shared";
import type { Engine } from "../docker/engine.js";
import { inspectAll } from "../docker/inspect.js";
import { errorMessage, type Logger } from "../log.js";
import { type ContainerState, resourceStatuses } from "./aggregate.js";
import type { ContainerEvent } from "./events.js";

export const FULL_REPORT_INTERVAL_MS = 60_000;
export const EVENT_DEBOUNCE_MS = 300;

/**
 * Keeps the control plane's view of resource statuses in step with the engine: a full report
 * on every (re)connect and every minute, and between them a report of just the resources
 * whose containers had an event, debounced so a rollout's burst of events is one message.
 */
export class StatusReporter {
  /** resource uuid -> its type, from the event's labels */
  private dirty = new Map<string, string>();
  private debounce: NodeJS.Timeout | null = null;
  private interval: NodeJS.Timeout | null = null;
  private running: Promise<void> = Promise.resolve();

  constructor(
    private readonly engine: Engine,
    private readonly send: (report: ResourceStatusReport) => void,
    private readonly log: Logger,
    private readonly opts: { fullIntervalMs?: number; debounceMs?: number } = {},
  ) {}

  start(): void {
    this.interval = setInterval(() => this.full(), this.opts.fullIntervalMs ?? FULL_REPORT_INTERVAL_MS);
    this.interval.unref();
  }

  stop(): void {
    if (this.interval) clearInterval(this.interval);
    if (this.debounce) clearTimeout(this.debounce);
    this.interval = this.debounce = null;
  }

  onEvent(e: ContainerEvent): void {
    const uuid = e.labels[LABEL_RESOURCE_UUID];
    if (!uuid) return;
    this.dirty.set(uuid, e.labels[LABEL_RESOURCE_TYPE] ?? "application");
    if (this.debounce) return;
    this.debounce = setTimeout(() => {
      this.debounce = null;
      const changed = [...this.dirty];
      this.dirty.clear();
      void this.enqueue(() => this.partial(changed));
    }, this.opts.debounceMs ?? EVENT_DEBOUNCE_MS);
    this.debounce.unref();
  }

  /** Reports every resource with containers on this engine. */
  full(): Promise<void> {
    return this.enqueue(async () => {
      const containers = await this.states(MANAGED);
      this.send({ full: true, resources: resourceStatuses(containers) });
    });
  }

  private async partial(changed: [uuid: string, type: string][]): Promise<void> {
    const resources = [];
    for (const [uuid, type] of changed) {
      const containers = await this.states({ ...MANAGED, [LABEL_RESOURCE_UUID]: uuid });
      const statuses = resourceStatuses(containers);
      // No container left (all destroyed): the resource is exited. A service's entry comes
      // with its components' (issue 17).
      if (statuses.length) resources.push(...statuses);
      else resources.push({ uuid, type, status: "exited" });
    }
    if (resources.length) this.send({ full: false, resources });
  }

  /** One report at a time, in order; a failure is logged and the next one goes on. */
  private enqueue(work: () => Promise<void>): Promise<void> {
    this.running = this.running.then(work).catch((err) => this.log.warn("could not report resource statuses", { err: errorMessage(err) }));
    return this.running;
  }

  private async states(labels: Record<string, string>): Promise<ContainerState[]> {
    const summaries = (await this.engine.listContainers(labels)).filter((s) => s.labels[LABEL_RESOURCE_UUID]);
    const out: ContainerState[] = (await inspectAll(this.engine, summaries)).map((d) => ({
      name: d.name,
      state: d.state,
      running: d.running,
      health: d.health,
      labels: d.labels,
    }));
    return out;
  }
}
