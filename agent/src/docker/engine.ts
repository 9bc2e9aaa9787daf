import { execFile } from "node:child_process";
import Docker from "dockerode";

/**
 * The agent's narrow view of the local Docker Engine. Handlers depend on this interface only
 * (unit tests fake it); DockerodeEngine implements it over the engine's unix socket.
 * Names are matched exactly: `inspectContainer("x")` never returns a container whose id merely
 * starts with "x", and `listNetworks("x")` never returns "x2" (the engine's name filter is a
 * substring match, and the engine allows several networks with one name).
 */
export interface Engine {
  readonly socketPath: string;
  ping(signal?: AbortSignal): Promise<void>;
  version(signal?: AbortSignal): Promise<EngineVersion>;
  info(signal?: AbortSignal): Promise<EngineInfo>;
  /** `docker compose version --short`, or null when the compose plugin is absent. */
  composeVersion(signal?: AbortSignal): Promise<string | null>;
  /** All containers (any state) carrying every given label. */
  listContainers(labels: Record<string, string>, signal?: AbortSignal): Promise<ContainerSummary[]>;
  /** The container with exactly this name, or null. */
  inspectContainer(name: string, signal?: AbortSignal): Promise<ContainerDetails | null>;
  imageExists(ref: string, signal?: AbortSignal): Promise<boolean>;
  /** Creates (does not start) a container; throws EngineError 409 when the name is taken. */
  createContainer(spec: CreateContainerSpec, signal?: AbortSignal): Promise<{ id: string }>;
  startContainer(id: string, signal?: AbortSignal): Promise<void>;
  unpauseContainer(id: string, signal?: AbortSignal): Promise<void>;
  /** Force-removes; throws EngineError 404 when it is gone. */
  removeContainer(id: string, signal?: AbortSignal): Promise<void>;
  /** Networks named exactly `name` (the engine allows duplicates), oldest first. */
  listNetworks(name: string, signal?: AbortSignal): Promise<NetworkSummary[]>;
  createNetwork(spec: CreateNetworkSpec, signal?: AbortSignal): Promise<{ id: string }>;
  inspectNetwork(idOrName: string, signal?: AbortSignal): Promise<NetworkSummary | null>;
  removeNetwork(id: string, signal?: AbortSignal): Promise<void>;
  /** The container's restart policy name, or null when it does not exist. */
  restartPolicy(id: string): Promise<string | null>;
  /** Sets restart policy "no" (a stood-down agent must not be restarted by the engine). */
  disableRestart(id: string): Promise<void>;
}

export interface EngineVersion {
  version: string;
  apiVersion: string;
}

export type SwarmState = "inactive" | "pending" | "active" | "error" | "locked";

export interface EngineInfo {
  name: string | null;
  serverVersion: string | null;
  operatingSystem: string | null;
  osType: string | null;
  kernelVersion: string | null;
  architecture: string | null;
  ncpu: number | null;
  memTotal: number | null;
  dockerRootDir: string | null;
  swarm: SwarmState | null;
}

export interface ContainerSummary {
  id: string;
  name: string;
  image: string;
  state: string;
  labels: Record<string, string>;
}

export interface ContainerDetails {
  id: string;
  name: string;
  image: string;
  /** created, running, paused, restarting, removing, exited, dead */
  state: string;
  running: boolean;
  paused: boolean;
  /** healthy, unhealthy, starting; null when the container has no health check */
  health: string | null;
  labels: Record<string, string>;
}

export interface CreateContainerSpec {
  name: string;
  image: string;
  cmd?: string[];
  env?: Record<string, string>;
  labels: Record<string, string>;
  network?: string;
  restart: "no" | "unless-stopped" | "always" | "on-failure";
}

export interface NetworkSummary {
  id: string;
  name: string;
  driver: string;
  created: string;
  labels: Record<string, string>;
}

export interface CreateNetworkSpec {
  name: string;
  driver: "bridge";
  labels: Record<string, string>;
}

/** An engine failure with a message fit for a job outcome. */
export class EngineError extends Error {
  override name = "EngineError";
  constructor(
    message: string,
    readonly statusCode: number | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

export const isNotFound = (err: unknown): boolean => err instanceof EngineError && err.statusCode === 404;
export const isConflict = (err: unknown): boolean => err instanceof EngineError && err.statusCode === 409;

/** dockerode takes {abortSignal} on these calls; @types/dockerode 4 does not say so. */
type WithSignal<T> = (this: Docker, opts: { abortSignal?: AbortSignal }) => Promise<T>;

const UNREACHABLE_CODES = new Set(["ENOENT", "ECONNREFUSED", "EACCES", "ECONNRESET", "EPIPE", "ETIMEDOUT"]);

export class DockerodeEngine implements Engine {
  private readonly docker: Docker;

  constructor(readonly socketPath: string = "/var/run/docker.sock") {
    this.docker = new Docker({ socketPath });
  }

  /** Turns dockerode/docker-modem errors into EngineErrors with the engine's own message. */
  private wrap(err: unknown, what: string): EngineError {
    if (err instanceof EngineError) return err;
    const e = err as { statusCode?: number; json?: { message?: string } | null; code?: string; message?: string; name?: string };
    if (e?.name === "AbortError") return new EngineError(`${what}: aborted`, null, "ABORT_ERR");
    if (e?.code && UNREACHABLE_CODES.has(e.code)) {
      return new EngineError(`Docker Engine is not reachable at ${this.socketPath} (${e.code})`, null, e.code);
    }
    if (typeof e?.statusCode === "number") {
      const detail = (e.json && typeof e.json === "object" && e.json.message) || e.message || "error";
      return new EngineError(`${what}: ${String(detail).trim()}`, e.statusCode);
    }
    return new EngineError(`${what}: ${e?.message ?? String(err)}`, null, e?.code ?? null);
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.wrap(err, what);
    }
  }

  async ping(signal?: AbortSignal): Promise<void> {
    await this.call("ping", () => (this.docker.ping as unknown as WithSignal<unknown>).call(this.docker, { abortSignal: signal }));
  }

  async version(signal?: AbortSignal): Promise<EngineVersion> {
    const v = await this.call("version", () => (this.docker.version as unknown as WithSignal<Docker.DockerVersion>).call(this.docker, { abortSignal: signal }));
    return { version: v.Version, apiVersion: v.ApiVersion };
  }

  async info(signal?: AbortSignal): Promise<EngineInfo> {
    const i = (await this.call("info", () => (this.docker.info as unknown as WithSignal<unknown>).call(this.docker, { abortSignal: signal }))) as Record<string, unknown>;
    const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : null);
    const num = (v: unknown) => (typeof v === "number" ? v : null);
    const swarmState = (i.Swarm as { LocalNodeState?: unknown } | undefined)?.LocalNodeState;
    const swarm = ["inactive", "pending", "active", "error", "locked"].includes(swarmState as string)
      ? (swarmState as SwarmState)
      : null;
    return {
      name: str(i.Name),
      serverVersion: str(i.ServerVersion),
      operatingSystem: str(i.OperatingSystem),
      osType: str(i.OSType),
      kernelVersion: str(i.KernelVersion),
      architecture: str(i.Architecture),
      ncpu: num(i.NCPU),
      memTotal: num(i.MemTotal),
      dockerRootDir: str(i.DockerRootDir),
      swarm,
    };
  }

  /**
   * The compose plugin (`docker compose`) when installed, else the standalone
   * `docker-compose` (Debian ships v1), else null.
   */
  async composeVersion(signal?: AbortSignal): Promise<string | null> {
    return (await this.versionOf("docker", ["compose", "version", "--short"], signal)) ?? this.versionOf("docker-compose", ["version", "--short"], signal);
  }

  private versionOf(cmd: string, args: string[], signal?: AbortSignal): Promise<string | null> {
    return new Promise((resolve) => {
      execFile(
        cmd,
        args,
        {
          env: { ...process.env, DOCKER_HOST: `unix://${this.socketPath}` },
          timeout: 15_000,
          signal,
          maxBuffer: 64 * 1024,
        },
        (err, stdout) => {
          const v = String(stdout ?? "").trim().replace(/^v/, "");
          resolve(err || !/^\d+\.\d+/.test(v) ? null : v);
        },
      );
    });
  }

  async listContainers(labels: Record<string, string>, signal?: AbortSignal): Promise<ContainerSummary[]> {
    const label = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
    const list = await this.call("list containers", () =>
      this.docker.listContainers({ all: true, filters: { label }, abortSignal: signal }),
    );
    return list.map((c) => ({
      id: c.Id,
      name: (c.Names[0] ?? "").replace(/^\//, ""),
      image: c.Image,
      state: c.State,
      labels: c.Labels ?? {},
    }));
  }

  async inspectContainer(name: string, signal?: AbortSignal): Promise<ContainerDetails | null> {
    let c: Docker.ContainerInspectInfo;
    try {
      c = await this.call(`inspect container ${name}`, () => this.docker.getContainer(name).inspect({ abortSignal: signal }));
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
    // The engine also resolves id prefixes: only an exact name match counts.
    if (c.Name !== `/${name}`) return null;
    const health = (c.State as { Health?: { Status?: string } }).Health?.Status;
    return {
      id: c.Id,
      name: c.Name.replace(/^\//, ""),
      image: c.Config.Image,
      state: c.State.Status,
      running: c.State.Running,
      paused: c.State.Paused,
      health: health && health !== "none" ? health : null,
      labels: c.Config.Labels ?? {},
    };
  }

  async imageExists(ref: string, signal?: AbortSignal): Promise<boolean> {
    signal?.throwIfAborted();
    try {
      await this.call(`inspect image ${ref}`, () => this.docker.getImage(ref).inspect());
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  async createContainer(spec: CreateContainerSpec, signal?: AbortSignal): Promise<{ id: string }> {
    const c = await this.call(`create container ${spec.name}`, () =>
      this.docker.createContainer({
        name: spec.name,
        Image: spec.image,
        Cmd: spec.cmd,
        Env: spec.env ? Object.entries(spec.env).map(([k, v]) => `${k}=${v}`) : undefined,
        Labels: spec.labels,
        HostConfig: {
          RestartPolicy: { Name: spec.restart },
          NetworkMode: spec.network,
        },
        abortSignal: signal,
      }),
    );
    return { id: c.id };
  }

  async startContainer(id: string, signal?: AbortSignal): Promise<void> {
    await this.call(`start container ${id.slice(0, 12)}`, () => this.docker.getContainer(id).start({ abortSignal: signal }));
  }

  async unpauseContainer(id: string, signal?: AbortSignal): Promise<void> {
    await this.call(`unpause container ${id.slice(0, 12)}`, () => this.docker.getContainer(id).unpause({ abortSignal: signal }));
  }

  async removeContainer(id: string, signal?: AbortSignal): Promise<void> {
    await this.call(`remove container ${id.slice(0, 12)}`, () =>
      this.docker.getContainer(id).remove({ force: true, abortSignal: signal }),
    );
  }

  async listNetworks(name: string, signal?: AbortSignal): Promise<NetworkSummary[]> {
    const list = await this.call("list networks", () =>
      this.docker.listNetworks({ filters: { name: [name] }, abortSignal: signal }),
    );
    return list
      .filter((n) => n.Name === name)
      .map((n) => ({
        id: n.Id,
        name: n.Name,
        driver: n.Driver,
        created: n.Created,
        labels: n.Labels ?? {},
      }))
      .sort((a, b) => a.created.localeCompare(b.created));
  }

  async createNetwork(spec: CreateNetworkSpec, signal?: AbortSignal): Promise<{ id: string }> {
    const n = await this.call(`create network ${spec.name}`, () =>
      this.docker.createNetwork({
        Name: spec.name,
        Driver: spec.driver,
        Labels: spec.labels,
        // Deprecated in API 1.44 (the engine then always refuses duplicates); honoured before.
        CheckDuplicate: true,
        abortSignal: signal,
      } as Docker.NetworkCreateOptions),
    );
    return { id: n.id };
  }

  async inspectNetwork(idOrName: string, signal?: AbortSignal): Promise<NetworkSummary | null> {
    signal?.throwIfAborted();
    try {
      const n = (await this.call(`inspect network ${idOrName}`, () => this.docker.getNetwork(idOrName).inspect())) as { Id: string; Name: string; Driver: string; Created: string; Labels?: Record<string, string> | null };
      return { id: n.Id, name: n.Name, driver: n.Driver, created: n.Created, labels: n.Labels ?? {} };
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async removeNetwork(id: string, signal?: AbortSignal): Promise<void> {
    await this.call(`remove network ${id.slice(0, 12)}`, () => this.docker.getNetwork(id).remove({ abortSignal: signal }));
  }

  async restartPolicy(id: string): Promise<string | null> {
    try {
      const c = await this.call(`inspect container ${id.slice(0, 12)}`, () => this.docker.getContainer(id).inspect());
      return c.HostConfig.RestartPolicy?.Name || "no";
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async disableRestart(id: string): Promise<void> {
    await this.call(`update container ${id.slice(0, 12)}`, () =>
      this.docker.getContainer(id).update({ RestartPolicy: { Name: "no", MaximumRetryCount: 0 } }),
    );
  }
}
