import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import type { DatabaseEngine, DbDeployPayload } from "@capstan/shared";
import { describe, expect, it } from "vitest";
import { readTar, TAR_END, tarHeader } from "../backup/tar.js";
import type { JobContext } from "../dispatch/types.js";
import { type ContainerDetails, type CreateContainerSpec, type Engine, EngineError, type NetworkDetails } from "../docker/engine.js";
import { createHandlers } from "../handlers/index.js";

interface FakeContainer {
  id: string;
  spec: CreateContainerSpec;
  state: string;
  health: string | null;
  healthOutput: string | null;
  restartCount: number;
  networks: string[];
  files: { dir: string; name: string; content: string; mode?: number; uid?: number; gid?: number }[];
}

/**
 * An engine in memory, enough for db.deploy / db.action: containers with labels and states,
 * volumes, images, networks. `onStart` decides what a started container's probe reports.
 */
class FakeEngine {
  readonly socketPath = "/fake.sock";
  containers = new Map<string, FakeContainer>();
  volumes = new Map<string, Record<string, string>>();
  images = new Set<string>(["postgres:17-alpine", "redis:7-alpine", "mongo:8"]);
  networks = new Set<string>(["capstan", "shared-1"]);
  log: string[] = [];
  /** The highest number of containers that ever had the same volume mounted at once. */
  maxOnVolume = 0;
  onStart: (c: FakeContainer) => void = (c) => {
    c.health = "healthy";
  };
  failStart: string | null = null;

  private details(c: FakeContainer): ContainerDetails {
    return {
      id: c.id,
      name: c.spec.name,
      image: c.spec.image,
      state: c.state,
      running: c.state === "running",
      paused: c.state === "paused",
      health: c.health,
      healthOutput: c.healthOutput,
      labels: c.spec.labels,
      restartCount: c.restartCount,
      exitCode: c.state === "exited" ? 1 : 0,
      networks: c.networks,
    };
  }
  private byId(id: string): FakeContainer {
    const c = [...this.containers.values()].find((x) => x.id === id);
    if (!c) throw new EngineError("no such container", 404);
    return c;
  }
  async inspectContainer(name: string) {
    const c = this.containers.get(name);
    return c ? this.details(c) : null;
  }
  async listContainers(labels: Record<string, string>) {
    return [...this.containers.values()]
      .filter((c) => Object.entries(labels).every(([k, v]) => c.spec.labels[k] === v))
      .map((c) => ({ id: c.id, name: c.spec.name, image: c.spec.image, state: c.state, labels: c.spec.labels }));
  }
  async imageExists(ref: string) {
    return this.images.has(ref);
  }
  async pullImage(ref: string) {
    this.log.push(`pull ${ref}`);
    throw new EngineError(`pull access denied for ${ref}`);
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
    if (!this.volumes.delete(name)) throw new EngineError("no such volume", 404);
    this.log.push(`remove volume ${name}`);
  }
  async listNetworks(name: string) {
    return this.networks.has(name) ? [{ id: `net-${name}`, name, driver: "bridge", created: "", labels: { "capstan.managed": "true" } }] : [];
  }
  async inspectNetworkDetails(id: string): Promise<NetworkDetails | null> {
    const name = id.replace(/^net-/, "");
    if (!this.networks.has(name)) return null;
    return { id, name, driver: "bridge", created: "", labels: { "capstan.managed": "true" }, scope: "local", internal: false, attachable: false, options: {}, subnet: null, gateway: null, containers: [] };
  }
  async connectNetwork(network: string, container: string) {
    this.containers.get(container)!.networks.push(network.replace(/^net-/, ""));
    this.log.push(`connect ${container} ${network}`);
  }
  async createContainer(spec: CreateContainerSpec) {
    if (this.containers.has(spec.name)) throw new EngineError("name in use", 409);
    const c: FakeContainer = { id: randomUUID(), spec, state: "created", health: null, healthOutput: null, restartCount: 0, networks: [spec.network!], files: [] };
    this.containers.set(spec.name, c);
    this.log.push(`create ${spec.name}`);
    return { id: c.id };
  }
  /** The data dir's owner in the image (redis:7's user). */
  dirUid = 999;
  /** What an authenticated PING answers, one reply per call, then PONG. */
  pingReplies: string[] = [];
  execs: { cmd: string[]; env?: Record<string, string>; stdin: string }[] = [];
  async getArchive(id: string, path: string) {
    this.byId(id);
    return Readable.from([tarHeader(path.replace(/^\//, ""), 0, { mode: 0o755, uid: this.dirUid, gid: this.dirUid }), TAR_END]);
  }
  async putArchive(id: string, dir: string, tar: NodeJS.ReadableStream) {
    const c = this.byId(id);
    if (c.state !== "created") throw new Error("files must be copied before start");
    for await (const e of readTar(tar as AsyncIterable<Buffer>)) {
      const chunks: Buffer[] = [];
      for await (const b of e.body) chunks.push(b);
      c.files.push({ dir, name: e.header.name, content: Buffer.concat(chunks).toString("utf8"), mode: e.header.mode, uid: e.header.uid, gid: e.header.gid });
      this.log.push(`put ${dir}/${e.header.name}`);
    }
  }
  async execStream(_id: string, spec: { cmd: string[]; env?: Record<string, string>; stdin?: NodeJS.ReadableStream | null }) {
    let stdin = "";
    for await (const b of (spec.stdin ?? []) as AsyncIterable<Buffer>) stdin += b.toString("utf8");
    this.execs.push({ cmd: spec.cmd, env: spec.env, stdin });
    const reply = this.pingReplies.shift() ?? "PONG";
    return { stdout: Readable.from([Buffer.from(`OK\n${reply}\n`)]), done: Promise.resolve({ exitCode: 0, stderr: "" }) };
  }
  async putFile(id: string, dir: string, name: string, content: Buffer) {
    const c = this.byId(id);
    if (c.state !== "created") throw new Error("files must be copied before start");
    c.files.push({ dir, name, content: content.toString("utf8") });
    this.log.push(`put ${dir}/${name}`);
  }
  async startContainer(id: string) {
    const c = this.byId(id);
    if (this.failStart) throw new EngineError(this.failStart, 500);
    c.state = "running";
    c.health = c.spec.healthcheck ? "starting" : null;
    this.log.push(`start ${c.spec.name}`);
    const onVolume = [...this.containers.values()].filter((x) => x.state === "running" && x.spec.mounts?.[0]?.source === c.spec.mounts?.[0]?.source).length;
    this.maxOnVolume = Math.max(this.maxOnVolume, onVolume);
    this.onStart(c);
  }
  async stopContainer(id: string) {
    const c = this.byId(id);
    c.state = "exited";
    this.log.push(`stop ${c.spec.name}`);
  }
  async restartContainer(id: string) {
    const c = this.byId(id);
    c.state = "running";
    this.log.push(`restart ${c.spec.name}`);
  }
  async unpauseContainer(id: string) {
    this.byId(id).state = "running";
  }
  async removeContainer(id: string) {
    const c = this.byId(id);
    this.containers.delete(c.spec.name);
    this.log.push(`remove ${c.spec.name}`);
  }
  async containersOfImage(ref: string) {
    return this.listContainers({}).then((l) => l.filter((c) => c.image === ref));
  }
  async removeImage(ref: string) {
    this.images.delete(ref);
    this.log.push(`remove image ${ref}`);
  }
  async containerLogs() {
    return { lines: ["FATAL: data directory has wrong ownership"], truncated: false };
  }
}

const UUID = "d1d1d1d1-0000-4000-8000-00000000000a";
const PASSWORD = "Zx9-secret-password-value";

function payload(engine: DatabaseEngine = "postgresql", over: Partial<DbDeployPayload> = {}): DbDeployPayload {
  const image = { postgresql: "postgres:17-alpine", redis: "redis:7-alpine", mongodb: "mongo:8" }[engine as string] ?? "missing:1";
  return {
    db: { uuid: UUID, name: "main db" },
    engine,
    image,
    credentials: { user: engine === "redis" ? null : "app", password: PASSWORD, database: engine === "redis" ? null : "appdb", root_password: null },
    env: {},
    network: "capstan",
    networks: [],
    ensure_networks: [],
    public_port: null,
    memory: null,
    cpus: null,
    ...over,
  };
}

function job(id = "job-1", signal = AbortSignal.timeout(10_000)): JobContext & { lines: string[] } {
  const lines: string[] = [];
  return { signal, progress: (l) => void lines.push(l), job: { id, attempt: 1 }, lines };
}

function setup() {
  const f = new FakeEngine();
  const h = createHandlers(f as unknown as Engine, { extraLabels: { "capstan.test": "1" }, db: { pollMs: 1, stopTimeoutS: 1 } });
  return { f, h };
}

describe("db.deploy", () => {
  it("creates the volume and the container, waits for health, and reports it", async () => {
    const { f, h } = setup();
    const ctx = job();
    const res = await h["db.deploy"](payload(), ctx);
    expect(res).toEqual({ container: UUID, status: "running:healthy" });
    expect(f.volumes.get(`capstan-db-${UUID}`)).toMatchObject({ "capstan.managed": "true", "capstan.resource.uuid": UUID, "capstan.test": "1" });
    expect(f.containers.get(UUID)!.spec.labels["capstan.resource.type"]).toBe("database");
    expect(ctx.lines.join("\n")).not.toContain(PASSWORD);
  });

  it("redeploys in place: the old container is stopped and removed before the new one exists", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload(), job("job-1"));
    f.log = [];
    await h["db.deploy"](payload("postgresql", { memory: "256m" }), job("job-2"));
    expect(f.log).toEqual([`stop ${UUID}`, `remove ${UUID}`, `create ${UUID}`, "put //capstan-init/postgres_password", `start ${UUID}`]);
    expect(f.maxOnVolume).toBe(1);
    expect(f.containers.get(UUID)!.spec.memoryBytes).toBe(256 * 1024 * 1024);
  });

  it("a redelivered job waits for the container it already started instead of replacing it", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload(), job("job-1"));
    const id = f.containers.get(UUID)!.id;
    f.log = [];
    const ctx = job("job-1");
    expect(await h["db.deploy"](payload(), ctx)).toEqual({ container: UUID, status: "running:healthy" });
    expect(f.log).toEqual([]);
    expect(f.containers.get(UUID)!.id).toBe(id);
  });

  it("copies redis's config file (with the password) in before the first start, owned like the data dir, never into argv or env", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload("redis"), job());
    const c = f.containers.get(UUID)!;
    expect(f.log.indexOf("put /data/capstan-redis.conf")).toBeLessThan(f.log.indexOf(`start ${UUID}`));
    expect(c.files[0]).toMatchObject({ mode: 0o600, uid: 999, gid: 999 });
    expect(c.files[0]!.content).toContain(`requirepass "${PASSWORD}"`);
    expect(c.spec.cmd).toEqual(["redis-server", "/data/capstan-redis.conf"]);
    expect(JSON.stringify([c.spec.cmd, c.spec.env])).not.toContain(PASSWORD);
  });

  it("postgresql: the password goes in a file outside the volume before the first start, owned like the data dir; the env names the file", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload("postgresql"), job());
    const c = f.containers.get(UUID)!;
    expect(f.log.indexOf("put //capstan-init/postgres_password")).toBeLessThan(f.log.indexOf(`start ${UUID}`));
    expect(c.files).toEqual([{ dir: "/", name: "capstan-init/postgres_password", content: PASSWORD, mode: 0o600, uid: 999, gid: 999 }]);
    expect(c.spec.env).toMatchObject({ POSTGRES_PASSWORD_FILE: "/capstan-init/postgres_password" });
    expect(JSON.stringify([c.spec.cmd, c.spec.env])).not.toContain(PASSWORD);
  });

  it("redis: waits past healthy until the dataset is loaded, asking with AUTH on stdin", async () => {
    const { f, h } = setup();
    f.pingReplies = ["LOADING Redis is loading the dataset in memory", "LOADING Redis is loading the dataset in memory"];
    const ctx = job();
    expect(await h["db.deploy"](payload("redis"), ctx)).toEqual({ container: UUID, status: "running:healthy" });
    expect(f.execs).toHaveLength(3);
    expect(ctx.lines.join("\n")).toMatch(/is loading its dataset; waiting/);
    for (const e of f.execs) {
      expect(e.cmd).toEqual(["redis-cli", "-h", "127.0.0.1", "-p", "6379"]);
      expect(e.env ?? {}).toEqual({});
      expect(e.stdin).toBe(`AUTH "${PASSWORD}"\n"PING"\n`);
    }
    // Any other answer is the deploy's failure reason.
    f.pingReplies = ["MISCONF something broke"];
    await expect(h["db.deploy"](payload("redis"), job("job-2"))).rejects.toThrow(/redis-cli PING: MISCONF something broke/);
  });

  it("joins the further networks after create, before start", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload("postgresql", { networks: ["shared-1"] }), job());
    expect(f.log.indexOf(`connect ${UUID} net-shared-1`)).toBeLessThan(f.log.indexOf(`start ${UUID}`));
    expect(f.containers.get(UUID)!.networks).toEqual(["capstan", "shared-1"]);
  });

  it("keeps the old container when the new image cannot be had", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload(), job("job-1"));
    await expect(h["db.deploy"](payload("postgresql", { image: "postgres:99" }), job("job-2"))).rejects.toThrow(/postgres:99 is not on this server and could not be pulled/);
    expect(f.containers.get(UUID)!.state).toBe("running");
  });

  it("keeps the old container when a network is missing", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload(), job("job-1"));
    await expect(h["db.deploy"](payload("postgresql", { networks: ["nope"] }), job("job-2"))).rejects.toThrow(/network nope does not exist/);
    expect(f.containers.get(UUID)!.state).toBe("running");
  });

  it("fails with the probe's output when the engine declares it unhealthy, and leaves it for its logs", async () => {
    const { f, h } = setup();
    f.onStart = (c) => {
      c.health = "unhealthy";
      c.healthOutput = "127.0.0.1:5432 - no response";
    };
    await expect(h["db.deploy"](payload(), job())).rejects.toThrow(/unhealthy: pg_isready failed 5 time\(s\) in a row; last output: 127\.0\.0\.1:5432 - no response/);
    expect(f.containers.has(UUID)).toBe(true);
  });

  it("fails at once when the image lacks the probe", async () => {
    const { f, h } = setup();
    f.onStart = (c) => {
      c.healthOutput = 'OCI runtime exec failed: exec: "mongosh": executable file not found in $PATH';
    };
    await expect(h["db.deploy"](payload("mongodb"), job())).rejects.toThrow(/cannot run the health check: mongosh is missing/);
  });

  it("fails with the exit code and the last log lines when the server exits", async () => {
    const { f, h } = setup();
    f.onStart = (c) => {
      c.state = "exited";
    };
    await expect(h["db.deploy"](payload(), job())).rejects.toThrow(/exited with code 1; last log lines:\nFATAL: data directory has wrong ownership/);
  });

  it("removes a container that could not start (e.g. its public port is taken) and says why", async () => {
    const { f, h } = setup();
    f.failStart = "Bind for 0.0.0.0:15432 failed: port is already allocated";
    await expect(h["db.deploy"](payload("postgresql", { public_port: 15432 }), job())).rejects.toThrow(/port is already allocated/);
    expect(f.containers.has(UUID)).toBe(false);
    expect(f.volumes.has(`capstan-db-${UUID}`)).toBe(true);
  });

  it("masks the password in a failure reason", async () => {
    const { f, h } = setup();
    f.failStart = `bad env POSTGRES_PASSWORD=${PASSWORD}`;
    const err = await h["db.deploy"](payload(), job()).catch((e: Error) => e);
    expect((err as Error).message).toContain("POSTGRES_PASSWORD=********");
    expect((err as Error).message).not.toContain(PASSWORD);
  });

  it("refuses to touch a container of that name that is not this database's", async () => {
    const { f, h } = setup();
    await f.createContainer({ name: UUID, image: "x", labels: { "capstan.managed": "true", "capstan.resource.uuid": UUID, "capstan.resource.type": "application" }, restart: "no" });
    await expect(h["db.deploy"](payload(), job())).rejects.toThrow(/taken by a container that is not this database's/);
    expect(f.containers.get(UUID)!.spec.image).toBe("x");
  });

  it("serialises one database's jobs: a stop sent during a deploy runs after it", async () => {
    const { f, h } = setup();
    const deploying = h["db.deploy"](payload(), job("job-1"));
    const stopping = h["db.action"]({ db: payload().db, action: "stop", delete_volumes: false, docker_cleanup: false }, job("job-2"));
    await Promise.all([deploying, stopping]);
    expect(f.log.slice(-2)).toEqual([`start ${UUID}`, `stop ${UUID}`]);
  });
});

describe("db.action", () => {
  const action = (a: "start" | "stop" | "restart" | "remove", over: { delete_volumes?: boolean; docker_cleanup?: boolean } = {}) => ({
    db: { uuid: UUID, name: "main db" },
    action: a,
    delete_volumes: over.delete_volumes ?? false,
    docker_cleanup: over.docker_cleanup ?? false,
  });

  it("stops, starts and restarts the container", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload(), job());
    expect((await h["db.action"](action("stop"), job())).status).toBe("exited:healthy");
    expect(f.containers.get(UUID)!.state).toBe("exited");
    expect((await h["db.action"](action("start"), job())).status).toMatch(/^running:/);
    expect((await h["db.action"](action("restart"), job())).status).toMatch(/^running:/);
    expect(f.log.slice(-3)).toEqual([`stop ${UUID}`, `start ${UUID}`, `restart ${UUID}`]);
  });

  it("start and restart need a container; stop of none is done", async () => {
    const { h } = setup();
    await expect(h["db.action"](action("start"), job())).rejects.toThrow(/has no container on this server; deploy it first/);
    await expect(h["db.action"](action("restart"), job())).rejects.toThrow(/deploy it first/);
    expect(await h["db.action"](action("stop"), job())).toEqual({ status: "exited" });
  });

  it("remove keeps the volume and image unless asked", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload(), job());
    expect(await h["db.action"](action("remove"), job())).toEqual({ status: "removed" });
    expect(f.containers.size).toBe(0);
    expect(f.volumes.has(`capstan-db-${UUID}`)).toBe(true);
    expect(f.images.has("postgres:17-alpine")).toBe(true);
  });

  it("remove with delete_volumes and docker_cleanup takes the volume and the unused image", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload(), job());
    await h["db.action"](action("remove", { delete_volumes: true, docker_cleanup: true }), job());
    expect(f.volumes.size).toBe(0);
    expect(f.images.has("postgres:17-alpine")).toBe(false);
  });

  it("docker_cleanup keeps an image another container still uses", async () => {
    const { f, h } = setup();
    await h["db.deploy"](payload(), job());
    await f.createContainer({ name: "someone-else", image: "postgres:17-alpine", labels: {}, restart: "no" });
    const ctx = job();
    await h["db.action"](action("remove", { docker_cleanup: true }), ctx);
    expect(f.images.has("postgres:17-alpine")).toBe(true);
    expect(ctx.lines.join("\n")).toContain("image postgres:17-alpine kept: used by someone-else");
  });
});
