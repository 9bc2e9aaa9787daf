import { describe, expect, it } from "vitest";
import { type ContainerState, resourceStatus, resourceStatuses } from "./aggregate.js";

const c = (name: string, over: Partial<ContainerState> & { deployment?: string; rollout?: number; uuid?: string } = {}): ContainerState => ({
  name,
  state: over.state ?? "running",
  running: over.running ?? (over.state ?? "running") === "running",
  health: over.health === undefined ? null : over.health,
  labels: {
    "capstan.resource.uuid": over.uuid ?? "app-1",
    "capstan.resource.type": "application",
    ...(over.deployment ? { "capstan.deployment": over.deployment } : {}),
    ...(over.rollout ? { "capstan.rollout": String(over.rollout) } : {}),
  },
});

describe("resourceStatus", () => {
  it("is exited without containers", () => {
    expect(resourceStatus([])).toBe("exited");
  });

  it("is the engine's composite status of a single container", () => {
    expect(resourceStatus([c("a", { health: "healthy" })])).toBe("running:healthy");
    expect(resourceStatus([c("a", { state: "exited", running: false, health: "unhealthy" })])).toBe("exited:unhealthy");
    expect(resourceStatus([c("a")])).toBe("running:unknown");
  });

  it("keeps reporting the serving container while a new one is still starting", () => {
    const old = c("old", { deployment: "d1", rollout: 1, health: "healthy" });
    const fresh = c("new", { deployment: "d2", rollout: 2, health: "starting" });
    expect(resourceStatus([old, fresh])).toBe("running:healthy");
  });

  it("switches to the new deployment once it is healthy", () => {
    const old = c("old", { deployment: "d1", rollout: 1, state: "exited", running: false });
    const fresh = c("new", { deployment: "d2", rollout: 2, health: "healthy" });
    expect(resourceStatus([old, fresh])).toBe("running:healthy");
  });

  it("shows the newest deployment's trouble when nothing serves", () => {
    const old = c("old", { deployment: "d1", rollout: 1, state: "exited", running: false });
    const fresh = c("new", { deployment: "d2", rollout: 2, health: "unhealthy" });
    expect(resourceStatus([old, fresh])).toBe("running:unhealthy");
  });

  it("aggregates the containers of one compose deployment", () => {
    const web = c("web", { deployment: "d1", rollout: 1, health: "healthy" });
    const worker = c("worker", { deployment: "d1", rollout: 1 });
    expect(resourceStatus([web, worker])).toBe("running:healthy");
    const down = c("worker", { deployment: "d1", rollout: 1, state: "exited", running: false });
    expect(resourceStatus([web, down])).toBe("degraded:healthy");
    const sick = c("db", { deployment: "d1", rollout: 1, health: "unhealthy" });
    expect(resourceStatus([web, sick])).toBe("running:unhealthy");
  });
});

describe("resourceStatuses", () => {
  it("groups by resource and ignores unlabelled containers", () => {
    const other: ContainerState = { name: "x", state: "running", running: true, health: null, labels: {} };
    const out = resourceStatuses([c("a", { uuid: "u1", health: "healthy" }), c("b", { uuid: "u2", state: "exited", running: false }), other]);
    expect(out).toEqual([
      { uuid: "u1", type: "application", status: "running:healthy" },
      { uuid: "u2", type: "application", status: "exited:unknown" },
    ]);
  });
});

describe("databases", () => {
  const db = (uuid: string, over: Partial<ContainerState> = {}): ContainerState => ({
    name: uuid,
    state: "running",
    running: true,
    health: "healthy",
    // What agent/src/databases sets: no deployment or rollout, type database.
    labels: {
      "capstan.managed": "true",
      "capstan.resource.uuid": uuid,
      "capstan.resource.type": "database",
      "capstan.deployment": "",
      "capstan.rollout": "",
    },
    ...over,
  });

  it("reports a database's one container under type database", () => {
    expect(resourceStatuses([db("db-1"), c("web", { uuid: "app-1", health: "healthy" })])).toEqual([
      { uuid: "db-1", type: "database", status: "running:healthy" },
      { uuid: "app-1", type: "application", status: "running:healthy" },
    ]);
  });

  it("shows a stopped or starting database as the engine does", () => {
    expect(resourceStatuses([db("db-1", { state: "exited", running: false })])).toEqual([{ uuid: "db-1", type: "database", status: "exited:healthy" }]);
    expect(resourceStatuses([db("db-2", { health: "starting" })])).toEqual([{ uuid: "db-2", type: "database", status: "running:starting" }]);
  });
});

// services lifecycle (issue 17)
describe("resourceStatuses of a service", () => {
  it("reports the service and one entry per component container (capstan.service.component)", () => {
    const svc = (name: string, component: string, over: Partial<ContainerState> = {}): ContainerState => {
      const base = c(name, { uuid: "svc-1", deployment: "d1", ...over });
      return { ...base, labels: { ...base.labels, "capstan.resource.type": "service", "capstan.service.component": component } };
    };
    const out = resourceStatuses([svc("svc-1-web", "comp-web", { health: "healthy" }), svc("svc-1-db", "comp-db", { state: "exited", running: false }), c("app")]);
    expect(out).toEqual([
      { uuid: "svc-1", type: "service", status: "degraded:healthy" },
      { uuid: "app-1", type: "application", status: "running:unknown" },
      { uuid: "comp-web", type: "service-component", status: "running:healthy" },
      { uuid: "comp-db", type: "service-component", status: "exited:unknown" },
    ]);
  });
});
