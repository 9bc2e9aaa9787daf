import type { ResourceStatusReport } from "@capstan/shared";
import { describe, expect, it } from "vitest";
import type { ContainerDetails, Engine } from "../docker/engine.js";
import type { Logger } from "../log.js";
import { StatusReporter } from "./reporter.js";

/** Containers as an engine holds them: a database, an application, and one the platform does not manage. */
function fakeEngine(containers: ContainerDetails[]): Engine {
  return {
    async listContainers(labels: Record<string, string>) {
      return containers
        .filter((c) => Object.entries(labels).every(([k, v]) => c.labels[k] === v))
        .map((c) => ({ id: c.id, name: c.name, image: c.image, state: c.state, labels: c.labels }));
    },
    async inspectContainer(name: string) {
      return containers.find((c) => c.name === name) ?? null;
    },
  } as unknown as Engine;
}

const details = (name: string, labels: Record<string, string>, over: Partial<ContainerDetails> = {}): ContainerDetails => ({
  id: `id-${name}`,
  name,
  image: "img",
  state: "running",
  running: true,
  paused: false,
  health: "healthy",
  labels,
  ...over,
});

const silent = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;

describe("StatusReporter", () => {
  it("reports databases (capstan.resource.type=database) in full reports and after their events", async () => {
    const dbLabels = { "capstan.managed": "true", "capstan.resource.uuid": "db-1", "capstan.resource.type": "database", "capstan.job": "j" };
    const containers = [
      details("db-1", dbLabels, { health: "starting" }),
      details("web-1", { "capstan.managed": "true", "capstan.resource.uuid": "app-1", "capstan.resource.type": "application" }),
      details("other", {}),
    ];
    const sent: ResourceStatusReport[] = [];
    const r = new StatusReporter(fakeEngine(containers), (m) => void sent.push(m), silent, { debounceMs: 1 });
    await r.full();
    expect(sent[0]).toEqual({
      full: true,
      resources: [
        { uuid: "db-1", type: "database", status: "running:starting" },
        { uuid: "app-1", type: "application", status: "running:healthy" },
      ],
    });

    containers[0]!.health = "healthy";
    r.onEvent({ action: "health_status", labels: dbLabels });
    await new Promise((res) => setTimeout(res, 30));
    expect(sent[1]).toEqual({ full: false, resources: [{ uuid: "db-1", type: "database", status: "running:healthy" }] });

    // Removed (db.action remove): the database is reported exited, still as a database.
    containers.splice(0, 1);
    r.onEvent({ action: "destroy", labels: dbLabels });
    await new Promise((res) => setTimeout(res, 30));
    expect(sent[2]).toEqual({ full: false, resources: [{ uuid: "db-1", type: "database", status: "exited" }] });
    r.stop();
  });
});
