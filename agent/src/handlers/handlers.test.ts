import { describe, expect, it, vi } from "vitest";
import { type ContainerDetails, type Engine, EngineError, type NetworkSummary } from "../docker/engine.js";
import type { JobContext } from "../dispatch/types.js";
import { createHandlers } from "./index.js";

const ctx = (id = "job-1"): JobContext & { lines: string[] } => {
  const lines: string[] = [];
  return { signal: new AbortController().signal, progress: (l) => lines.push(l), job: { id, attempt: 1 }, lines };
};

const managed = (over: Partial<ContainerDetails> = {}): ContainerDetails => ({
  id: "c".repeat(64),
  name: "web",
  image: "capstan-test/busybox:latest",
  state: "running",
  running: true,
  paused: false,
  health: null,
  labels: { "capstan.managed": "true", "capstan.job": "job-0" },
  ...over,
});

/** An engine double: every method fails unless a test provides it. */
function fakeEngine(over: Partial<Engine>): Engine {
  const missing = (name: string) => () => Promise.reject(new Error(`unexpected call: ${name}`));
  const base = Object.fromEntries(
    ["ping", "version", "info", "composeVersion", "listContainers", "inspectContainer", "imageExists", "createContainer", "startContainer", "unpauseContainer", "removeContainer", "listNetworks", "createNetwork", "inspectNetwork", "removeNetwork", "restartPolicy", "disableRestart"].map((m) => [m, vi.fn(missing(m))]),
  );
  return { socketPath: "/fake.sock", ...base, ...over } as Engine;
}

const spec = { name: "web", image: "capstan-test/busybox:latest", labels: {}, restart: "unless-stopped" as const };

describe("container.ensure", () => {
  it("creates with platform labels and starts when absent", async () => {
    const createContainer = vi.fn(async () => ({ id: "new-id" }));
    const startContainer = vi.fn(async () => {});
    const engine = fakeEngine({ inspectContainer: async () => null, imageExists: async () => true, createContainer, startContainer });
    const h = createHandlers(engine, { extraLabels: { "capstan.test": "1" } });
    const result = await h["container.ensure"]({ ...spec, labels: { app: "a", "capstan.managed": "false" }, env: { A: "1" }, cmd: ["sleep", "1"] }, ctx("job-9"));
    expect(result).toEqual({ id: "new-id", created: true });
    expect(createContainer).toHaveBeenCalledWith(
      {
        name: "web",
        image: spec.image,
        cmd: ["sleep", "1"],
        env: { A: "1" },
        labels: { "capstan.test": "1", app: "a", "capstan.managed": "true", "capstan.job": "job-9" },
        network: undefined,
        restart: "unless-stopped",
      },
      expect.anything(),
    );
    expect(startContainer).toHaveBeenCalledWith("new-id", expect.anything());
  });

  it("returns the existing container, starting it when stopped", async () => {
    const startContainer = vi.fn(async () => {});
    const engine = fakeEngine({ inspectContainer: async () => managed({ state: "exited", running: false }), startContainer });
    const r = await createHandlers(engine)["container.ensure"](spec, ctx());
    expect(r).toEqual({ id: "c".repeat(64), created: false });
    expect(startContainer).toHaveBeenCalledTimes(1);
  });

  it("reports created:true when an earlier attempt of the same job created it", async () => {
    const engine = fakeEngine({ inspectContainer: async () => managed({ labels: { "capstan.managed": "true", "capstan.job": "job-1" } }) });
    expect(await createHandlers(engine)["container.ensure"](spec, ctx("job-1"))).toMatchObject({ created: true });
  });

  it("treats a 409 name conflict (created concurrently) as existing", async () => {
    let inspections = 0;
    const engine = fakeEngine({
      inspectContainer: async () => (inspections++ === 0 ? null : managed()),
      imageExists: async () => true,
      createContainer: async () => {
        throw new EngineError('create container web: Conflict. The container name "/web" is already in use', 409);
      },
    });
    expect(await createHandlers(engine)["container.ensure"](spec, ctx())).toEqual({ id: "c".repeat(64), created: false });
  });

  it("fails clearly when the image is not present (no pulls)", async () => {
    const createContainer = vi.fn();
    const engine = fakeEngine({ inspectContainer: async () => null, imageExists: async () => false, createContainer });
    await expect(createHandlers(engine)["container.ensure"]({ ...spec, image: "nginx:1.27" }, ctx())).rejects.toThrow("image nginx:1.27 is not present on this server");
    expect(createContainer).not.toHaveBeenCalled();
  });

  it("fails clearly when its network does not exist", async () => {
    const engine = fakeEngine({ inspectContainer: async () => null, imageExists: async () => true, listNetworks: async () => [] });
    await expect(createHandlers(engine)["container.ensure"]({ ...spec, network: "capstan" }, ctx())).rejects.toThrow("network capstan does not exist on this server");
  });

  it("refuses to adopt or remove a container Capstan does not manage", async () => {
    const engine = fakeEngine({ inspectContainer: async () => managed({ labels: {} }) });
    const h = createHandlers(engine);
    await expect(h["container.ensure"](spec, ctx())).rejects.toThrow(/not managed by Capstan/);
    await expect(h["container.remove"]({ name: "web" }, ctx())).rejects.toThrow(/not managed by Capstan/);
  });

  it("serialises concurrent ensures of one name inside the agent", async () => {
    let exists = false;
    const createContainer = vi.fn(async () => {
      await new Promise((r) => setTimeout(r, 10));
      exists = true;
      return { id: "c".repeat(64) };
    });
    const engine = fakeEngine({
      inspectContainer: async () => (exists ? managed() : null),
      imageExists: async () => true,
      createContainer,
      startContainer: async () => {},
    });
    const h = createHandlers(engine);
    const [a, b] = await Promise.all([h["container.ensure"](spec, ctx("a")), h["container.ensure"](spec, ctx("b"))]);
    expect(createContainer).toHaveBeenCalledTimes(1);
    expect([a.created, b.created]).toEqual([true, false]);
  });
});

describe("container.remove", () => {
  it("removes by exact name; a missing one (or one gone meanwhile) is removed:false", async () => {
    const removeContainer = vi.fn(async () => {});
    const h = createHandlers(fakeEngine({ inspectContainer: async () => managed(), removeContainer }));
    expect(await h["container.remove"]({ name: "web" }, ctx())).toEqual({ removed: true });
    expect(removeContainer).toHaveBeenCalledWith("c".repeat(64), expect.anything());
    expect(await createHandlers(fakeEngine({ inspectContainer: async () => null }))["container.remove"]({ name: "web" }, ctx())).toEqual({ removed: false });
    const gone = fakeEngine({
      inspectContainer: async () => managed(),
      removeContainer: async () => {
        throw new EngineError("no such container", 404);
      },
    });
    expect(await createHandlers(gone)["container.remove"]({ name: "web" }, ctx())).toEqual({ removed: false });
  });
});

describe("server.prepare", () => {
  const net = (name: string): NetworkSummary => ({ id: name + "-id", name, driver: "bridge", created: "2026-01-01", labels: {} });

  it("creates missing networks, reports existing ones, once per name", async () => {
    const createNetwork = vi.fn(async () => ({ id: "x" }));
    const engine = fakeEngine({ listNetworks: async (name: string) => (name === "capstan" ? [net("capstan")] : []), createNetwork });
    const r = await createHandlers(engine)["server.prepare"]({ networks: ["capstan", "capstan-proxy", "capstan-proxy"] }, ctx());
    expect(r).toEqual({ created: ["capstan-proxy"], existing: ["capstan"] });
    expect(createNetwork).toHaveBeenCalledWith({ name: "capstan-proxy", driver: "bridge", labels: { "capstan.managed": "true" } }, expect.anything());
  });

  it("counts a 409 from the engine as existing", async () => {
    let calls = 0;
    const engine = fakeEngine({
      listNetworks: async () => (calls++ === 0 ? [] : [net("capstan")]),
      createNetwork: async () => {
        throw new EngineError("create network capstan: network with name capstan already exists", 409);
      },
    });
    expect(await createHandlers(engine)["server.prepare"]({ networks: ["capstan"] }, ctx())).toEqual({ created: [], existing: ["capstan"] });
  });
});

describe("server.validate", () => {
  it("reports versions, and fails with the engine's reason when it is down", async () => {
    const up = fakeEngine({ ping: async () => {}, version: async () => ({ version: "20.10.24", apiVersion: "1.41" }), composeVersion: async () => null });
    expect(await createHandlers(up)["server.validate"]({}, ctx())).toEqual({ docker_version: "20.10.24", api_version: "1.41", compose_version: null });
    const down = fakeEngine({
      ping: async () => {
        throw new EngineError("Docker Engine is not reachable at /fake.sock (ECONNREFUSED)", null, "ECONNREFUSED");
      },
    });
    await expect(createHandlers(down)["server.validate"]({}, ctx())).rejects.toThrow("Docker Engine is not reachable at /fake.sock (ECONNREFUSED)");
  });
});

describe("containers.list", () => {
  it("maps state and health to the composite status", async () => {
    const engine = fakeEngine({
      listContainers: async () => [
        { id: "1", name: "b", image: "img", state: "running", labels: { "capstan.managed": "true" } },
        { id: "2", name: "a", image: "img", state: "exited", labels: { "capstan.managed": "true" } },
        { id: "3", name: "gone", image: "img", state: "running", labels: { "capstan.managed": "true" } },
      ],
      inspectContainer: async (name: string) =>
        name === "b" ? managed({ id: "1", name: "b", health: "healthy" }) : name === "a" ? managed({ id: "2", name: "a", state: "exited", running: false, health: null }) : null,
    });
    const r = await createHandlers(engine)["containers.list"]({}, ctx());
    expect(r.containers.map((c) => [c.name, c.status])).toEqual([
      ["a", "exited:unknown"],
      ["b", "running:healthy"],
    ]); // "gone" was removed between the list and its inspect
  });
});
