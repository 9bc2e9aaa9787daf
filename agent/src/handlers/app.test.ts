import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DeployPayload } from "@capstan/shared";
import { describe, expect, it, vi } from "vitest";
import type { BuildImageOptions, ContainerDetails, ContainerSummary, CreateContainerSpec, Engine } from "../docker/engine.js";
import { EngineError } from "../docker/engine.js";
import type { JobContext } from "../dispatch/types.js";
import type { DeployDeps } from "../deploy/deps.js";
import { BindMountRefused } from "../deploy/binds.js";
import { rollout } from "../deploy/rollout.js";
import { parsePayload } from "../dispatch/dispatch.js";
import { createHandlers } from "./index.js";

interface FakeContainer extends ContainerDetails {
  spec: CreateContainerSpec;
}

/**
 * An in-memory engine: containers, images, volumes. `health(name)` decides what a started
 * container's health check reports; `exitOnStart(name)` makes a container exit right away.
 */
class FakeEngine implements Partial<Engine> {
  readonly socketPath = "/fake.sock";
  containers = new Map<string, FakeContainer>();
  images = new Set<string>(["capstan-test/busybox:latest"]);
  volumes = new Map<string, Record<string, string>>();
  builtImages = new Map<string, Record<string, string>>();
  /** tag -> unix seconds of the build (listImages' Created) */
  imageCreated = new Map<string, number>();
  calls: string[] = [];
  health: (name: string) => string = () => "healthy";
  healthOutput = "";
  exitOnStart: (name: string) => boolean = () => false;
  private seq = 0;

  add(name: string, labels: Record<string, string>, over: Partial<FakeContainer> = {}) {
    const id = `id-${name}`;
    this.containers.set(name, {
      id, name, image: "old:1", state: "running", running: true, paused: false, health: null, labels, restartCount: 0, exitCode: 0, startedAt: "t", healthOutput: null,
      spec: { name, image: "old:1", labels, restart: "unless-stopped" }, ...over,
    });
  }
  private byId(id: string) {
    const c = [...this.containers.values()].find((x) => x.id === id);
    if (!c) throw new EngineError(`no such container ${id}`, 404);
    return c;
  }
  async inspectContainer(name: string) {
    const c = this.containers.get(name);
    return c ? { ...c } : null;
  }
  async listContainers(labels: Record<string, string>): Promise<ContainerSummary[]> {
    return [...this.containers.values()]
      .filter((c) => Object.entries(labels).every(([k, v]) => c.labels[k] === v))
      .map((c) => ({ id: c.id, name: c.name, image: c.image, state: c.state, labels: c.labels }));
  }
  async imageExists(ref: string) {
    return this.images.has(ref);
  }
  async pullImage(ref: string, onLine: (l: string) => void) {
    this.calls.push(`pull ${ref}`);
    onLine(`pulling ${ref} with password s3cr3t-run`);
    throw new EngineError(`pull access denied for ${ref}`);
  }
  async buildImage(_ctx: NodeJS.ReadableStream, opts: BuildImageOptions, onLine: (l: string) => void): Promise<{ id: string | null }> {
    this.calls.push(`build ${opts.tag}`);
    onLine(`Step 1/2 : ARG TOKEN=${opts.buildargs.TOKEN ?? ""}`);
    this.images.add(opts.tag);
    this.builtImages.set(opts.tag, opts.labels);
    this.imageCreated.set(opts.tag, 1_000_000 + this.imageCreated.size);
    return { id: "sha256:abc" };
  }
  async listNetworks(name: string) {
    return name === "capstan" ? [{ id: "n1", name, driver: "bridge", created: "", labels: {} }] : [];
  }
  async ensureVolume(spec: { name: string; labels: Record<string, string> }) {
    const created = !this.volumes.has(spec.name);
    if (created) this.volumes.set(spec.name, spec.labels);
    return { name: spec.name, created };
  }
  async listVolumes(labels: Record<string, string>) {
    return [...this.volumes].filter(([, l]) => Object.entries(labels).every(([k, v]) => l[k] === v)).map(([name, l]) => ({ name, labels: l }));
  }
  async removeVolume(name: string) {
    this.calls.push(`rmvol ${name}`);
    this.volumes.delete(name);
  }
  async listImages(labels: Record<string, string>) {
    return [...this.builtImages].filter(([, l]) => Object.entries(labels).every(([k, v]) => l[k] === v)).map(([tag, l]) => ({ id: `sha256:${tag}`, tags: [tag], labels: l, created: this.imageCreated.get(tag) ?? 0 }));
  }
  async removeImage(id: string) {
    this.calls.push(`rmi ${id}`);
    this.builtImages.delete(id.replace(/^sha256:/, ""));
  }
  async createContainer(spec: CreateContainerSpec) {
    if (this.containers.has(spec.name)) throw new EngineError("name in use", 409);
    this.calls.push(`create ${spec.name}`);
    const id = `id-${spec.name}-${++this.seq}`;
    this.containers.set(spec.name, {
      id, name: spec.name, image: spec.image, state: "created", running: false, paused: false, health: null, labels: spec.labels, restartCount: 0, exitCode: null, startedAt: null, healthOutput: null, spec,
    });
    return { id };
  }
  async startContainer(id: string) {
    const c = this.byId(id);
    this.calls.push(`start ${c.name}`);
    if (this.exitOnStart(c.name)) {
      Object.assign(c, { state: "exited", running: false, exitCode: 3 });
      return;
    }
    Object.assign(c, { state: "running", running: true, health: c.spec.healthcheck ? this.health(c.name) : null, healthOutput: c.spec.healthcheck ? this.healthOutput : null });
  }
  async unpauseContainer(id: string) {
    Object.assign(this.byId(id), { state: "running", running: true, paused: false });
  }
  async stopContainer(id: string) {
    const c = this.byId(id);
    this.calls.push(`stop ${c.name}`);
    Object.assign(c, { state: "exited", running: false });
  }
  async restartContainer(id: string) {
    const c = this.byId(id);
    this.calls.push(`restart ${c.name}`);
    Object.assign(c, { state: "running", running: true });
  }
  async removeContainer(id: string) {
    const c = this.byId(id);
    this.calls.push(`rm ${c.name}`);
    this.containers.delete(c.name);
  }
  async containerLogs(id: string, opts: { tail: number; timestamps: boolean }) {
    const c = this.byId(id);
    const lines = [`2026-01-01T00:00:00Z ${c.name} line 1`, `2026-01-01T00:00:01Z ${c.name} boom s3cr3t-run`];
    return { lines: opts.timestamps ? lines : lines.map((l) => l.slice(21)), truncated: false };
  }
}

const APP = "app-1";
const DEP = "dep-0123456789abcdef";
const NEW = `${APP}-dep-01234567`;
const OLD = `${APP}-old`;
const oldLabels = { "capstan.managed": "true", "capstan.resource.uuid": APP, "capstan.deployment": "dep-old", "capstan.rollout": "1000" };

const payload = (over: { source?: DeployPayload["source"]; run?: Partial<DeployPayload["run"]>; build?: Partial<DeployPayload["build"]> } = {}): DeployPayload => ({
  deployment_uuid: DEP,
  app: { uuid: APP, name: "web" },
  source: over.source ?? { kind: "image", image: "capstan-test/busybox:latest" },
  build: { pack: "containerimage", no_cache: false, base_directory: "/", env: {}, base_images: { node: "n", python: "p", go: "g", static: "s", runtime: "r" }, ...over.build },
  run: {
    env: { PASSWORD: "s3cr3t-run" },
    ports: [8080],
    health: { path: "/health", port: 8080, interval_s: 1, timeout_s: 1, retries: 2, start_period_s: 0 },
    mounts: [{ volume: "data", mount_path: "/data" }],
    network: "capstan",
    networks: [],
    ensure_networks: [],
    proxy_network: null,
    memory: "256m",
    cpus: "0.5",
    routes: [{ host: "web.example.test", https: false, path: "/" }],
    ...over.run,
  },
  proxy: { name: "capstan-proxy", image: "capstan-test/caddy:latest", networks: ["capstan"], ensure_networks: [], http_port: 80, https_port: 443 },
});

const job = (signal = new AbortController().signal): JobContext & { lines: string[] } => {
  const lines: string[] = [];
  return { signal, progress: (l) => lines.push(l), job: { id: "job-1", attempt: 1 }, lines };
};

function setup(deps: Partial<DeployDeps> = {}, stateDir = "/nonexistent-state-dir") {
  const engine = new FakeEngine();
  const syncProxy = vi.fn(async () => ({ routes: 1 }));
  const composeDown = vi.fn(async () => ({ containers: 0, volumes: 0 }));
  const handlers = createHandlers(engine as unknown as Engine, {
    extraLabels: { "capstan.test": "1" },
    stateDir,
    timing: { pollMs: 5, stableMs: 20, stopTimeoutS: 1, cleanupTimeoutMs: 1000 },
    deps: { syncProxy, composeDown, ...deps },
  });
  return { engine, syncProxy, composeDown, handlers };
}

describe("app.deploy rollout", () => {
  it("starts the new container, waits for healthy, switches the proxy, then retires the old one", async () => {
    const { engine, syncProxy, handlers } = setup();
    engine.add(OLD, oldLabels);
    const ctx = job();
    const result = await handlers["app.deploy"](payload(), ctx);
    expect(result).toEqual({ image: "capstan-test/busybox:latest", container: NEW, commit: null, commit_message: null, status: "running:healthy" });
    expect(engine.calls).toEqual([`create ${NEW}`, `start ${NEW}`, `stop ${OLD}`, `rm ${OLD}`]);
    expect(syncProxy).toHaveBeenCalledTimes(1);
    const spec = engine.containers.get(NEW)!.spec;
    expect(spec.labels).toMatchObject({
      "capstan.test": "1",
      "capstan.managed": "true",
      "capstan.resource.uuid": APP,
      "capstan.resource.name": "web",
      "capstan.resource.type": "application",
      "capstan.deployment": DEP,
      "capstan.domains": "web.example.test",
      "capstan.proxy.port": "8080",
      "capstan.proxy.network": "capstan",
      "capstan.proxy.routes": JSON.stringify([{ host: "web.example.test", https: false, path: "/" }]),
    });
    expect(Number(spec.labels["capstan.rollout"])).toBeGreaterThan(1000);
    expect(spec).toMatchObject({ env: { PASSWORD: "s3cr3t-run" }, network: "capstan", restart: "unless-stopped", exposedPorts: [8080], memoryBytes: 256 * 1024 ** 2, nanoCpus: 5e8 });
    expect(spec.mounts).toEqual([{ type: "volume", source: `${APP}-data`, target: "/data" }]);
    expect(engine.volumes.get(`${APP}-data`)).toMatchObject({ "capstan.managed": "true", "capstan.resource.uuid": APP, "capstan.test": "1" });
    expect(spec.healthcheck?.test[1]).toContain("'http://127.0.0.1:8080/health'");
  });

  it("keeps the old container serving when the new one is unhealthy, and fails with the probe output", async () => {
    const { engine, syncProxy, handlers } = setup();
    engine.add(OLD, oldLabels);
    engine.health = () => "unhealthy";
    engine.healthOutput = "curl: (22) The requested URL returned error: 500";
    await expect(handlers["app.deploy"](payload(), job())).rejects.toThrow(/unhealthy.*127\.0\.0\.1:8080\/health.*error: 500/s);
    expect(engine.containers.has(NEW)).toBe(false);
    expect(engine.containers.get(OLD)?.running).toBe(true);
    expect(engine.calls).not.toContain(`stop ${OLD}`);
    expect(syncProxy).not.toHaveBeenCalled();
  });

  it("fails with the exit code and masked last log lines when a container without health check exits", async () => {
    const { engine, handlers } = setup();
    engine.add(OLD, oldLabels);
    engine.exitOnStart = (n) => n === NEW;
    const err = await handlers["app.deploy"](payload({ run: { health: null } }), job()).catch((e: Error) => e);
    expect(String(err)).toMatch(/exited with code 3/);
    expect(String(err)).toContain("boom ********");
    expect(String(err)).not.toContain("s3cr3t-run");
    expect(engine.containers.has(NEW)).toBe(false);
    expect(engine.containers.get(OLD)?.running).toBe(true);
  });

  it("fails a container the engine keeps restarting, even when seen running between restarts", async () => {
    const { engine, handlers } = setup();
    engine.add(OLD, oldLabels);
    // The first inspection sees it up; by the next one the engine has restarted it.
    const inspect = engine.inspectContainer.bind(engine);
    let seen = 0;
    engine.inspectContainer = async (name: string) => {
      const c = engine.containers.get(name);
      if (name === NEW && c?.running && ++seen === 2) Object.assign(c, { restartCount: 1, exitCode: 0 });
      return inspect(name);
    };
    await expect(handlers["app.deploy"](payload({ run: { health: null } }), job())).rejects.toThrow(/exited and was restarted by the engine \(1 restart\(s\)\)/);
    expect(engine.containers.has(NEW)).toBe(false);
    expect(engine.containers.get(OLD)?.running).toBe(true);
  });

  it("on cancel while waiting for health removes the new container and leaves the old one", async () => {
    const { engine, syncProxy, handlers } = setup();
    engine.add(OLD, oldLabels);
    engine.health = () => "starting";
    const ac = new AbortController();
    const running = handlers["app.deploy"](payload(), job(ac.signal));
    await vi.waitFor(() => expect(engine.calls).toContain(`start ${NEW}`));
    ac.abort(new Error("cancelled by the control plane"));
    await expect(running).rejects.toThrow(/cancelled/);
    expect(engine.containers.has(NEW)).toBe(false);
    expect(engine.containers.get(OLD)?.running).toBe(true);
    expect(syncProxy).not.toHaveBeenCalled();
  });

  it("rolls back and re-syncs the proxy when the proxy sync fails", async () => {
    let n = 0;
    const { engine, handlers } = setup({
      syncProxy: async () => {
        if (n++ === 0) throw new EngineError("proxy rejected the configuration: bad");
        return { routes: 1 };
      },
    });
    engine.add(OLD, oldLabels);
    await expect(handlers["app.deploy"](payload(), job())).rejects.toThrow(/proxy rejected/);
    expect(n).toBe(2);
    expect(engine.containers.has(NEW)).toBe(false);
    expect(engine.containers.get(OLD)?.running).toBe(true);
  });

  it("on redelivery adopts the container an earlier attempt started: no pull, no build, no second container", async () => {
    const { engine, handlers } = setup();
    engine.add(OLD, oldLabels);
    engine.add(NEW, { ...oldLabels, "capstan.deployment": DEP, "capstan.rollout": "2000", "capstan.commit": "c0ffee" }, { image: "capstan/app-1:dep", health: "healthy" });
    const result = await handlers["app.deploy"](payload({ source: { kind: "dockerfile", dockerfile: "FROM x" } }), job());
    expect(result).toEqual({ image: "capstan/app-1:dep", container: NEW, commit: "c0ffee", commit_message: null, status: "running:healthy" });
    expect(engine.calls).toEqual([`stop ${OLD}`, `rm ${OLD}`]);
  });

  it("replaces a container an earlier attempt left exited", async () => {
    const { engine, handlers } = setup();
    engine.add(NEW, { ...oldLabels, "capstan.deployment": DEP }, { state: "exited", running: false });
    await handlers["app.deploy"](payload(), job());
    expect(engine.calls).toEqual([`rm ${NEW}`, `create ${NEW}`, `start ${NEW}`]);
  });

  it("never touches a same-named container of another deployment", async () => {
    const { engine, handlers } = setup();
    engine.add(NEW, { ...oldLabels, "capstan.deployment": "other" });
    await expect(handlers["app.deploy"](payload(), job())).rejects.toThrow(/taken by a container of another deployment/);
    expect(engine.containers.has(NEW)).toBe(true);
  });

  it("fails with the reason when the image is neither local nor pullable, masking secrets", async () => {
    const { engine, handlers } = setup();
    const ctx = job();
    const err = await handlers["app.deploy"](payload({ source: { kind: "image", image: "nowhere/app:1" } }), ctx).catch((e: Error) => e);
    expect(String(err)).toMatch(/nowhere\/app:1 is not on this server and could not be pulled: .*pull access denied/);
    expect(ctx.lines.join("\n")).toContain("with password ********");
    expect(ctx.lines.join("\n")).not.toContain("s3cr3t-run");
    expect(engine.calls).toEqual(["pull nowhere/app:1"]);
  });

  it("builds a Dockerfile source with build args, labels and a per-deployment tag; masks build output", async () => {
    const engine = new FakeEngine();
    const stateDir = await mkdtemp(join(tmpdir(), "capstan-state-"));
    const h = createHandlers(engine as unknown as Engine, { extraLabels: { "capstan.test": "1" }, stateDir, timing: { pollMs: 5, stableMs: 20 }, deps: { syncProxy: async () => ({ routes: 1 }) } });
    const ctx = job();
    const r = await h["app.deploy"](payload({ source: { kind: "dockerfile", dockerfile: "FROM capstan-test/busybox\nARG TOKEN\n" }, build: { pack: "containerfile", env: { TOKEN: "build-secret-1" }, no_cache: true } }), ctx);
    expect(r.image).toBe(`capstan/${APP}:${DEP}`);
    expect(engine.builtImages.get(`capstan/${APP}:${DEP}`)).toEqual({ "capstan.test": "1", "capstan.managed": "true", "capstan.resource.uuid": APP });
    expect(ctx.lines).toContain("Step 1/2 : ARG TOKEN=********");
    // The private work dir is gone afterwards.
    expect(await readdir(join(stateDir, "builds"))).toEqual([]);
    await rm(stateDir, { recursive: true, force: true });
  });

  it("keeps the serving image and the one before it; older images built for the app are removed", async () => {
    const engine = new FakeEngine();
    const stateDir = await mkdtemp(join(tmpdir(), "capstan-state-"));
    const labels = { "capstan.managed": "true", "capstan.resource.uuid": APP };
    for (const [i, tag] of ["capstan/app-1:d1", "capstan/app-1:d2", "capstan/app-1:d3"].entries()) {
      engine.builtImages.set(tag, labels);
      engine.imageCreated.set(tag, 1000 + i);
    }
    engine.builtImages.set("capstan/other:d1", { ...labels, "capstan.resource.uuid": "other-app" });
    const h = createHandlers(engine as unknown as Engine, { stateDir, timing: { pollMs: 5, stableMs: 20 }, deps: { syncProxy: async () => ({ routes: 1 }) } });
    const r = await h["app.deploy"](payload({ source: { kind: "dockerfile", dockerfile: "FROM capstan-test/busybox\n" }, build: { pack: "containerfile" } }), job());
    expect([...engine.builtImages.keys()].sort()).toEqual([r.image, "capstan/app-1:d3", "capstan/other:d1"].sort());
    await rm(stateDir, { recursive: true, force: true });
  });

  it("prunes after deploying an image a build server built for the app, never after a user's own image (no listing at all)", async () => {
    const labels = { "capstan.managed": "true", "capstan.resource.uuid": APP };
    const world = () => {
      const { engine, handlers } = setup();
      for (const [i, tag] of ["capstan/app-1:d1", "capstan/app-1:d2", "capstan/app-1:d3"].entries()) {
        engine.builtImages.set(tag, labels);
        engine.imageCreated.set(tag, 1000 + i);
      }
      return { engine, handlers, listed: vi.spyOn(engine, "listImages") };
    };

    const own = world();
    await own.handlers["app.deploy"](payload(), job());
    expect(own.listed).not.toHaveBeenCalled();
    expect(own.engine.builtImages.size).toBe(3);

    const remote = world();
    remote.engine.images.add("capstan/app-1:d3");
    await remote.handlers["app.deploy"](payload({ source: { kind: "image", image: "capstan/app-1:d3", built_for_app: true } }), job());
    expect(remote.listed).toHaveBeenCalledTimes(1);
    expect([...remote.engine.builtImages.keys()].sort()).toEqual(["capstan/app-1:d2", "capstan/app-1:d3"]);
  });
});

describe("app.deploy: the agent checks bind mounts again (the last line)", () => {
  const binds = (...host_paths: string[]) => ({ run: { mounts: host_paths.map((host_path, i) => ({ host_path, mount_path: `/m${i}` })) } });

  it.each(["//etc", "/var//run/docker.sock", "///root/.ssh", "/var/lib//docker", "/var", "/home", "/var/spool/cron/crontabs", "/", "/srv/../etc"])(
    "refuses a payload binding %j with a reason, before pulling, building or creating anything",
    async (hostPath) => {
      const { engine, handlers, syncProxy } = setup();
      await expect(handlers["app.deploy"](payload(binds("/srv/ok", hostPath)), job())).rejects.toThrow(/refused by the agent: .*(system directory|normal form)/);
      expect(engine.calls).toEqual([]);
      expect(engine.containers.size).toBe(0);
      expect(syncProxy).not.toHaveBeenCalled();
    },
  );

  it("refuses the agent's own state directory and engine socket, which the control plane does not know", async () => {
    const { engine, handlers } = setup({}, "/srv/capstan-agent-state");
    await expect(handlers["app.deploy"](payload(binds("/srv/capstan-agent-state/compose")), job())).rejects.toThrow(/lies inside the system directory \/srv\/capstan-agent-state/);
    await expect(handlers["app.deploy"](payload(binds("/fake.sock")), job())).rejects.toThrow(/\/fake.sock is a system directory/);
    expect(engine.calls).toEqual([]);
  });

  it("refuses the engine's data root when it is not the default /var/lib/docker (asked from the engine)", async () => {
    const engine = Object.assign(new FakeEngine(), { info: vi.fn(async () => ({ dockerRootDir: "/data/docker" })) });
    const handlers = createHandlers(engine as unknown as Engine, { stateDir: "/nonexistent-state-dir", timing: { pollMs: 5, stableMs: 20, stopTimeoutS: 1, cleanupTimeoutMs: 1000 }, deps: { syncProxy: vi.fn(async () => ({ routes: 1 })) } });
    await expect(handlers["app.deploy"](payload(binds("/data/docker/volumes")), job())).rejects.toThrow(/lies inside the system directory \/data\/docker/);
    await expect(handlers["app.deploy"](payload(binds("/data")), job())).rejects.toThrow(/\/data contains the system directory \/data\/docker/);
    expect(engine.calls).toEqual([]);
    await handlers["app.deploy"](payload(binds("/data/uploads")), job());
    expect(engine.info).toHaveBeenCalledTimes(1); // asked once per engine
  });

  it("mounts a legit server directory as it came", async () => {
    const { engine, handlers } = setup();
    await handlers["app.deploy"](payload(binds("/srv/app/data")), job());
    expect(engine.containers.get(NEW)!.spec.mounts).toEqual([{ type: "bind", source: "/srv/app/data", target: "/m0" }]);
  });

  it("the rollout itself refuses right before creating the container", async () => {
    const engine = new FakeEngine();
    const env = { engine: engine as unknown as Engine, deps: { syncProxy: vi.fn(async () => ({ routes: 1 })) }, extraLabels: {}, timing: { pollMs: 5, stableMs: 20, stopTimeoutS: 1, cleanupTimeoutMs: 1000 }, sensitivePaths: ["/srv/state"] };
    await expect(rollout(env, { payload: payload(binds("/usr")), image: "capstan-test/busybox:latest", commit: null }, job())).rejects.toThrow(BindMountRefused);
    await expect(rollout(env, { payload: payload(binds("/srv/state")), image: "capstan-test/busybox:latest", commit: null }, job())).rejects.toThrow(/\/srv\/state is a system directory/);
    expect(engine.calls.filter((c) => c.startsWith("create"))).toEqual([]);
  });

  it("a payload the control plane would refuse is already refused when the job arrives (parse), with the reason", () => {
    const r = parsePayload("app.deploy", payload(binds("//etc")));
    expect(r).toMatchObject({ ok: false, reason: expect.stringMatching(/^invalid app.deploy payload: run\.mounts\.0.*\/etc is a system directory/) });
  });
});

describe("app.deploy of a compose app", () => {
  it("delegates to deployCompose with the state dir, then syncs the proxy", async () => {
    const order: string[] = [];
    const deployCompose = vi.fn(async () => {
      order.push("compose");
      return { container: `${APP}-web`, status: "running:healthy" };
    });
    const { handlers, syncProxy } = setup({ deployCompose });
    syncProxy.mockImplementation(async () => {
      order.push("proxy");
      return { routes: 1 };
    });
    const r = await handlers["app.deploy"](payload({ source: { kind: "compose", compose: "{}" }, build: { pack: "containercompose" } }), job());
    expect(r).toEqual({ image: "", container: `${APP}-web`, commit: null, status: "running:healthy" });
    expect(order).toEqual(["compose", "proxy"]);
    expect(deployCompose).toHaveBeenCalledWith(expect.anything(), expect.objectContaining({ deployment_uuid: DEP }), expect.objectContaining({ stateDir: "/nonexistent-state-dir" }));
  });
});

describe("app.deploy from git", () => {
  const git = (token = "tok-secret-1234"): DeployPayload["source"] => ({ kind: "git", url: "https://git.example.test/o/r.git", branch: "main", commit: null, auth: { kind: "token", username: "x-access-token", token } });

  it("checks out into a private work dir, writes the builder's plan and builds with Dockerfile.capstan", async () => {
    const stateDir = await mkdtemp(join(tmpdir(), "capstan-state-"));
    let built: string | undefined;
    const fetchGit = vi.fn(async (_src: unknown, dest: string) => {
      await mkdir(join(dest, "apps/web"), { recursive: true });
      await writeFile(join(dest, "apps/web/package.json"), "{}");
      return { commit: "a".repeat(40), message: "first commit" };
    });
    const planBuild = vi.fn(async (input: { dir: string }) => {
      built = input.dir;
      return { dockerfile: "FROM node\n", files: { "capstan/start.sh": "#!/bin/sh\n" }, summary: "node app" };
    });
    const { engine, handlers } = setup({ fetchGit, planBuild }, stateDir);
    const seen: string[] = [];
    engine.buildImage = async (_ctx, opts) => {
      seen.push(await readFile(join(built!, opts.dockerfile), "utf8"), await readFile(join(built!, "capstan/start.sh"), "utf8"));
      engine.images.add(opts.tag);
      return { id: null };
    };
    const r = await handlers["app.deploy"](payload({ source: git(), build: { pack: "builder_a", base_directory: "/apps/web" } }), job());
    expect(r.commit).toBe("a".repeat(40));
    expect(r.image).toBe(`capstan/${APP}:${DEP}`);
    expect(built).toMatch(/\/builds\/dep-0123456789abcdef-[^/]+\/src\/apps\/web$/);
    expect(seen).toEqual(["FROM node\n", "#!/bin/sh\n"]);
    expect(engine.containers.get(NEW)?.labels["capstan.commit"]).toBe("a".repeat(40));
    expect(await readdir(join(stateDir, "builds"))).toEqual([]);
    await rm(stateDir, { recursive: true, force: true });
  });

  it("containerfile needs a Dockerfile at the base directory; the git token never shows", async () => {
    const stateDir = await mkdtemp(join(tmpdir(), "capstan-state-"));
    const fetchGit = vi.fn(async (_src: unknown, dest: string, ctx: { progress(l: string): void }) => {
      ctx.progress("remote: using tok-secret-1234");
      await mkdir(dest, { recursive: true });
      await writeFile(join(dest, "README"), "x");
      return { commit: "b".repeat(40), message: "m" };
    });
    const { handlers } = setup({ fetchGit }, stateDir);
    const ctx = job();
    await expect(handlers["app.deploy"](payload({ source: git(), build: { pack: "containerfile" } }), ctx)).rejects.toThrow(/no Dockerfile in \/ of the repository/);
    expect(ctx.lines).toContain("remote: using ********");
    await rm(stateDir, { recursive: true, force: true });
  });

  it("a builder's BuildPlanError fails the deployment with its reason", async () => {
    const stateDir = await mkdtemp(join(tmpdir(), "capstan-state-"));
    const fetchGit = vi.fn(async (_src: unknown, dest: string) => {
      await mkdir(dest, { recursive: true });
      await writeFile(join(dest, "x.txt"), "x");
      return { commit: "c".repeat(40), message: "m" };
    });
    const planBuild = vi.fn(async () => Promise.reject(new Error("builder_c needs a Procfile")));
    const { engine, handlers } = setup({ fetchGit, planBuild }, stateDir);
    await expect(handlers["app.deploy"](payload({ source: git(), build: { pack: "builder_c" } }), job())).rejects.toThrow("builder_c needs a Procfile");
    expect(engine.calls).toEqual([]);
    await rm(stateDir, { recursive: true, force: true });
  });
});

describe("app.action", () => {
  const proxy = payload().proxy;
  const newLabels = { ...oldLabels, "capstan.deployment": DEP, "capstan.rollout": "2000" };

  it("stop stops every container of the app and syncs the proxy", async () => {
    const { engine, syncProxy, handlers } = setup();
    engine.add(NEW, newLabels);
    engine.add("other-app", { ...oldLabels, "capstan.resource.uuid": "app-2" });
    const r = await handlers["app.action"]({ app: { uuid: APP, name: "web" }, action: "stop", delete_volumes: false, docker_cleanup: false, proxy }, job());
    expect(r).toEqual({ status: "exited:unknown" });
    expect(engine.calls).toEqual([`stop ${NEW}`]);
    expect(syncProxy).toHaveBeenCalledTimes(1);
  });

  it("start brings back only the newest rollout", async () => {
    const { engine, handlers } = setup();
    engine.add(OLD, oldLabels, { state: "exited", running: false });
    engine.add(NEW, newLabels, { state: "exited", running: false });
    const r = await handlers["app.action"]({ app: { uuid: APP, name: "web" }, action: "start", delete_volumes: false, docker_cleanup: false, proxy }, job());
    expect(r.status).toBe("running:unknown");
    expect(engine.containers.get(OLD)?.running).toBe(false);
  });

  it("start without any container fails with a reason", async () => {
    const { handlers } = setup();
    await expect(handlers["app.action"]({ app: { uuid: APP, name: "web" }, action: "start", delete_volumes: false, docker_cleanup: false, proxy }, job())).rejects.toThrow(/no container on this server/);
  });

  it("remove deletes containers, and with the flags the app's volumes and built images only", async () => {
    const { engine, handlers, composeDown } = setup();
    engine.add(NEW, newLabels);
    engine.volumes.set(`${APP}-data`, { "capstan.managed": "true", "capstan.resource.uuid": APP });
    engine.volumes.set("app-2-data", { "capstan.managed": "true", "capstan.resource.uuid": "app-2" });
    engine.builtImages.set(`capstan/${APP}:d1`, { "capstan.managed": "true", "capstan.resource.uuid": APP });
    engine.builtImages.set("capstan/app-2:d1", { "capstan.managed": "true", "capstan.resource.uuid": "app-2" });
    const r = await handlers["app.action"]({ app: { uuid: APP, name: "web" }, action: "remove", delete_volumes: true, docker_cleanup: true, proxy }, job());
    expect(r).toEqual({ status: "removed" });
    expect(engine.calls).toEqual([`rm ${NEW}`, `rmvol ${APP}-data`, `rmi sha256:capstan/${APP}:d1`]);
    expect([...engine.volumes.keys()]).toEqual(["app-2-data"]);
    expect(composeDown).toHaveBeenCalledWith(engine, { appUuid: APP, removeVolumes: true, keepFiles: false }, expect.objectContaining({ stateDir: "/nonexistent-state-dir" }));
  });

  it("remove with delete_configurations false still removes the containers and resyncs the proxy; only the configuration files stay (issue 15)", async () => {
    const { engine, handlers, composeDown, syncProxy } = setup();
    engine.add(OLD, oldLabels, { state: "exited", running: false });
    engine.add(NEW, newLabels);
    engine.volumes.set(`${APP}-data`, { "capstan.managed": "true", "capstan.resource.uuid": APP });
    const r = await handlers["app.action"]({ app: { uuid: APP, name: "web" }, action: "remove", delete_volumes: false, docker_cleanup: false, delete_configurations: false, proxy }, job());
    expect(r).toEqual({ status: "removed" });
    expect(engine.calls.filter((c) => c.startsWith("rm ")).sort()).toEqual([`rm ${NEW}`, `rm ${OLD}`].sort());
    expect(engine.containers.size).toBe(0);
    expect([...engine.volumes.keys()]).toEqual([`${APP}-data`]);
    expect(composeDown).toHaveBeenCalledWith(engine, { appUuid: APP, removeVolumes: false, keepFiles: true }, expect.objectContaining({ stateDir: "/nonexistent-state-dir" }));
    expect(syncProxy).toHaveBeenCalledTimes(1);
  });

  it("reports a failed proxy sync as a failed action with the reason", async () => {
    const { engine, handlers } = setup({ syncProxy: async () => Promise.reject(new Error("proxy image missing")) });
    engine.add(NEW, newLabels);
    await expect(handlers["app.action"]({ app: { uuid: APP, name: "web" }, action: "restart", delete_volumes: false, docker_cleanup: false, proxy }, job())).rejects.toThrow(/restart done, but the proxy could not be updated: proxy image missing/);
  });
});

describe("app.logs", () => {
  it("reads the newest running container's lines with timestamps", async () => {
    const { engine, handlers } = setup();
    engine.add(OLD, { ...oldLabels, "capstan.rollout": "3000" }, { state: "exited", running: false });
    engine.add(NEW, { ...oldLabels, "capstan.rollout": "2000" });
    const r = await handlers["app.logs"]({ app: { uuid: APP, name: "web" }, since_s: 0, tail: 1 }, job());
    expect(r).toEqual({ container: NEW, lines: [`2026-01-01T00:00:01Z ${NEW} boom s3cr3t-run`], truncated: true });
  });

  it("masks the secrets the payload names before the lines leave (values shorter than 4 characters stay)", async () => {
    const { engine, handlers } = setup();
    engine.add(NEW, oldLabels);
    const r = await handlers["app.logs"]({ app: { uuid: APP, name: "web" }, since_s: 0, tail: 10, secrets: ["s3cr3t-run", "ab"] }, job());
    expect(r.lines).toEqual([`2026-01-01T00:00:00Z ${NEW} line 1`, `2026-01-01T00:00:01Z ${NEW} boom ********`]);
  });

  it("answers no container when the app has none", async () => {
    const { handlers } = setup();
    expect(await handlers["app.logs"]({ app: { uuid: APP, name: "web" }, since_s: 60, tail: 100 }, job())).toEqual({ container: null, lines: [], truncated: false });
  });
});

// services lifecycle (issue 17)
describe("service.action", () => {
  const proxy = payload().proxy;
  const SVC = "5e1c2d3e-0a1b-4c5d-8e9f-0123456789ab";
  const svcLabels = (component: string) => ({ ...oldLabels, "capstan.resource.uuid": SVC, "capstan.resource.type": "service", "capstan.deployment": DEP, "capstan.service.component": component });

  it("stop stops every container of the service (not another resource's), syncs the proxy and answers each component's status", async () => {
    const { engine, syncProxy, handlers } = setup();
    engine.add(`${SVC}-web`, svcLabels("c-web"));
    engine.add(`${SVC}-db`, svcLabels("c-db"));
    engine.add(NEW, oldLabels);
    const r = await handlers["service.action"]({ service: { uuid: SVC, name: "stack" }, action: "stop", delete_volumes: false, docker_cleanup: false, delete_configurations: true, proxy }, job());
    expect(engine.calls.sort()).toEqual([`stop ${SVC}-db`, `stop ${SVC}-web`]);
    expect(r.status).toBe("exited:unknown");
    expect(r.components.sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: "db", status: "exited:unknown" },
      { name: "web", status: "exited:unknown" },
    ]);
    expect(syncProxy).toHaveBeenCalledTimes(1);
  });

  it("remove takes the compose project down with the flags, removes what is left and syncs the proxy", async () => {
    const { engine, syncProxy, composeDown, handlers } = setup();
    engine.add(`${SVC}-web`, svcLabels("c-web"));
    const r = await handlers["service.action"]({ service: { uuid: SVC, name: "stack" }, action: "remove", delete_volumes: true, docker_cleanup: false, delete_configurations: false, proxy }, job());
    expect(r).toEqual({ status: "removed", components: [] });
    expect(composeDown).toHaveBeenCalledWith(engine, { appUuid: SVC, removeVolumes: true, keepFiles: true }, expect.objectContaining({ stateDir: "/nonexistent-state-dir" }));
    expect(engine.calls).toEqual([`rm ${SVC}-web`]);
    expect(syncProxy).toHaveBeenCalledTimes(1);
  });
});
