import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import Docker from "dockerode";
import type { SwarmNode, SwarmRole } from "@capstan/shared";
import {
  type BuildImageOptions,
  type ContainerDetails,
  type ContainerMount,
  type ContainerLogsQuery,
  type ContainerSummary,
  type CreateContainerSpec,
  type CreateNetworkSpec,
  type Engine,
  EngineError,
  type EngineInfo,
  type EngineVersion,
  type ExecOutcome,
  type ExecSession,
  type ExecSpec,
  type ImageSummary,
  type NetworkDetails,
  type NetworkSummary,
  type RegistryCredentials,
  type SwarmNodeSpec,
  type SwarmState,
  type VolumeSummary,
  isConflict,
  isNotFound,
} from "./engine.js";
import { ExecDemux } from "./exec-demux.js";
import { LineSplitter, readJsonLines, readLogFrames } from "./streams.js";
import { singleFileTar } from "./tar.js";
import { engineHint } from "./engine-watch.js";

/**
 * The Engine interfaces (engine.ts) over dockerode and the engine's unix socket: engine
 * errors become EngineErrors with the engine's own message, exact-name lookups, abortable calls.
 */

/** dockerode takes {abortSignal} on these calls; @types/dockerode 4 does not say so. */
type WithSignal<T> = (this: Docker, opts: { abortSignal?: AbortSignal }) => Promise<T>;

const UNREACHABLE_CODES = new Set(["ENOENT", "ECONNREFUSED", "EACCES", "ECONNRESET", "EPIPE", "ETIMEDOUT"]);

/** How stopping an exec's processes went: whether any were found and signalled; why it failed. */
interface Stopped {
  signalled: boolean;
  note: string | null;
}

/** The environment variable that marks the processes of one exec (see execStream). */
export const EXEC_MARKER_VAR = "CAPSTAN_EXEC_ID";
/** How long a stopped exec's processes get between SIGTERM and SIGKILL. */
const EXEC_STOP_GRACE_MS = 5_000;
/** Bound of each helper exec that signals another exec's processes. */
const EXEC_SIGNAL_TIMEOUT_MS = 15_000;
/**
 * `sh -c SCRIPT sh MARKER SIGNAL`: sends SIGNAL (TERM, KILL, or 0 to ask) to every process of the
 * container whose environment holds MARKER and prints their pids. The marker and the signal are
 * positional parameters, never part of the script. The environment is matched entry by entry
 * (busybox's `grep -F` stops at the first NUL of /proc/PID/environ). Processes whose environment
 * cannot be read (other users') are skipped; its own processes do not carry the marker.
 */
const SIGNAL_MARKED_SCRIPT =
  'for d in /proc/[0-9]*; do p="${d#/proc/}"; { tr "\\0" "\\n" <"$d/environ"; } 2>/dev/null | grep -qxF -- "$1" && kill -"$2" "$p" 2>/dev/null && echo "$p"; done; exit 0';

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
      // The first sentence is what callers match; the hint says what to do (engine-watch.ts).
      return new EngineError(`Docker Engine is not reachable at ${this.socketPath} (${e.code}): ${engineHint(e.code)}`, null, e.code);
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
      swarmRole: swarmRoleOf(i.Swarm),
      swarmNodeId: str((i.Swarm as { NodeID?: unknown } | undefined)?.NodeID),
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
    const healthState = (c.State as { Health?: { Status?: string; Log?: { Output?: string }[] | null } }).Health;
    const health = healthState?.Status;
    const probes = healthState?.Log ?? [];
    return {
      restartCount: c.RestartCount,
      exitCode: typeof c.State.ExitCode === "number" ? c.State.ExitCode : null,
      startedAt: c.State.StartedAt || null,
      healthOutput: probes.length > 0 ? String(probes[probes.length - 1]?.Output ?? "").trim() : null,
      id: c.Id,
      name: c.Name.replace(/^\//, ""),
      image: c.Config.Image,
      state: c.State.Status,
      running: c.State.Running,
      paused: c.State.Paused,
      health: health && health !== "none" ? health : null,
      labels: c.Config.Labels ?? {},
      networks: Object.keys(c.NetworkSettings?.Networks ?? {}),
      mounts: (c.Mounts ?? []).flatMap((m): ContainerMount[] => {
        if (m.Type === "volume" && m.Name) return [{ type: "volume", source: m.Name, target: m.Destination }];
        if (m.Type === "bind" && m.Source) return [{ type: "bind", source: m.Source, target: m.Destination }];
        return [];
      }),
    };
  }

  /** (resource restores, w7/restore) The image of the container this process runs in (its hostname is the container's id), null outside one. */
  async ownImage(): Promise<string | null> {
    try {
      const c = await this.docker.getContainer(hostname()).inspect();
      return c.Image || null;
    } catch {
      return null;
    }
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
        Entrypoint: spec.entrypoint,
        Env: spec.env ? Object.entries(spec.env).map(([k, v]) => `${k}=${v}`) : undefined,
        Labels: spec.labels,
        ExposedPorts: exposedPortsOf(spec),
        StopTimeout: spec.stopTimeoutS,
        Healthcheck: spec.healthcheck
          ? {
              Test: spec.healthcheck.test,
              Interval: spec.healthcheck.intervalS * 1e9,
              Timeout: spec.healthcheck.timeoutS * 1e9,
              Retries: spec.healthcheck.retries,
              StartPeriod: spec.healthcheck.startPeriodS * 1e9,
            }
          : undefined,
        HostConfig: {
          RestartPolicy: { Name: spec.restart },
          NetworkMode: spec.network,
          Mounts: spec.mounts?.map((m) => ({ Type: m.type, Source: m.source, Target: m.target, ReadOnly: false })),
          Memory: spec.memoryBytes,
          NanoCpus: spec.nanoCpus,
          PortBindings: spec.publish?.length
            ? Object.fromEntries(spec.publish.map((p) => [`${p.port}/tcp`, [{ HostIp: p.hostIp, HostPort: String(p.hostPort) }]]))
            : undefined,
        },
        abortSignal: signal,
      }),
    );
    return { id: c.id };
  }

  async startContainer(id: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.call(`start container ${id.slice(0, 12)}`, () => this.docker.getContainer(id).start({ abortSignal: signal }));
    } catch (err) {
      // 304: already started (e.g. by a concurrent caller): the state asked for.
      if (err instanceof EngineError && err.statusCode === 304) return;
      throw err;
    }
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
        ...(spec.attachable !== undefined ? { Attachable: spec.attachable } : {}),
        ...(spec.options ? { Options: spec.options } : {}),
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

  async listAllNetworks(signal?: AbortSignal): Promise<NetworkSummary[]> {
    const list = await this.call("list networks", () => this.docker.listNetworks({ abortSignal: signal } as Docker.NetworkListOptions));
    return list.map((n) => ({ id: n.Id, name: n.Name, driver: n.Driver, created: n.Created, labels: n.Labels ?? {} }));
  }

  async inspectNetworkDetails(idOrName: string, signal?: AbortSignal): Promise<NetworkDetails | null> {
    signal?.throwIfAborted();
    let n: Docker.NetworkInspectInfo;
    try {
      n = await this.call(`inspect network ${idOrName}`, () => this.docker.getNetwork(idOrName).inspect());
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
    // The engine also resolves id prefixes: only the exact name or the full id counts.
    if (n.Name !== idOrName && n.Id !== idOrName) return null;
    return networkDetailsOf(n);
  }

  async connectNetwork(network: string, container: string, signal?: AbortSignal): Promise<void> {
    await this.call(`connect ${container} to network ${network}`, () =>
      this.docker.getNetwork(network).connect({ Container: container, abortSignal: signal } as object),
    );
  }

  async disconnectNetwork(network: string, container: string, force: boolean, signal?: AbortSignal): Promise<void> {
    await this.call(`disconnect ${container} from network ${network}`, () =>
      this.docker.getNetwork(network).disconnect({ Container: container, Force: force, abortSignal: signal } as object),
    );
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

  async buildImage(context: NodeJS.ReadableStream, opts: BuildImageOptions, onLine: (line: string) => void, signal?: AbortSignal): Promise<{ id: string | null }> {
    const what = `build image ${opts.tag}`;
    const stream = await this.call(what, () =>
      this.docker.buildImage(context, {
        dockerfile: opts.dockerfile,
        t: opts.tag,
        buildargs: opts.buildargs,
        nocache: opts.nocache,
        labels: opts.labels,
        ...(opts.registryConfig && Object.keys(opts.registryConfig).length ? { registryconfig: opts.registryConfig } : {}),
        // Intermediate containers of failed steps go too: nothing of a failed build stays behind.
        rm: true,
        forcerm: true,
        abortSignal: signal,
      }),
    );
    let id: string | null = null;
    const text = new LineSplitter(onLine);
    await this.call(what, () =>
      readJsonLines(stream, signal, (msg) => {
        if (msg.error || msg.errorDetail) throw new EngineError(`${what}: ${String(msg.errorDetail?.message ?? msg.error).trim()}`);
        if (typeof msg.stream === "string") {
          text.push(msg.stream);
          const built = /^Successfully built ([0-9a-f]{12,64})\s*$/m.exec(msg.stream);
          if (built && !id) id = built[1]!;
        }
        if (typeof msg.status === "string") onLine(msg.status);
        const auxId = (msg.aux as { ID?: unknown } | undefined)?.ID;
        if (typeof auxId === "string") id = auxId;
      }),
    );
    text.end();
    return { id };
  }

  // registries (issue 18)
  // clusters (issue 20)
  async inspectSwarm(signal?: AbortSignal): Promise<{ id: string; name: string | null } | null> {
    let sw: { ID?: unknown; Spec?: { Name?: unknown } };
    try {
      sw = (await this.call("inspect swarm", () => (this.docker.swarmInspect as unknown as WithSignal<unknown>).call(this.docker, { abortSignal: signal }))) as typeof sw;
    } catch (err) {
      // 503: this engine is not a manager (a worker, or in no swarm); 406 on some versions.
      if (err instanceof EngineError && (err.statusCode === 503 || err.statusCode === 406)) return null;
      throw err;
    }
    if (typeof sw?.ID !== "string") return null;
    return { id: sw.ID, name: typeof sw.Spec?.Name === "string" ? sw.Spec.Name : null };
  }

  async listNodes(signal?: AbortSignal): Promise<SwarmNode[]> {
    const list = (await this.call("list nodes", () => (this.docker.listNodes as unknown as WithSignal<unknown>).call(this.docker, { abortSignal: signal }))) as unknown[];
    return list.map(swarmNodeOf).sort((a, b) => a.hostname.localeCompare(b.hostname) || a.id.localeCompare(b.id));
  }

  async inspectNode(id: string, signal?: AbortSignal): Promise<{ node: SwarmNode; spec: SwarmNodeSpec }> {
    signal?.throwIfAborted();
    const raw = (await this.call(`inspect node ${id}`, () => this.docker.getNode(id).inspect())) as { Spec?: Record<string, unknown> };
    const node = swarmNodeOf(raw);
    const name = raw.Spec?.Name;
    return { node, spec: { ...(typeof name === "string" && name ? { Name: name } : {}), Labels: node.labels, Role: node.role, Availability: node.availability } };
  }

  async updateNode(id: string, version: number, spec: SwarmNodeSpec, signal?: AbortSignal): Promise<void> {
    // docker-modem: _query becomes the query string (version), _body the JSON body (the whole spec).
    const node = this.docker.getNode(id);
    // @types/dockerode types update as callback-only; without a callback it returns a promise.
    const update = node.update as unknown as (this: Docker.Node, opts: unknown) => Promise<unknown>;
    await this.call(`update node ${id}`, () => update.call(node, { _query: { version }, _body: spec, abortSignal: signal }));
  }

  async listServices(signal?: AbortSignal): Promise<unknown[]> {
    return (await this.call("list services", () => (this.docker.listServices as unknown as WithSignal<unknown>).call(this.docker, { abortSignal: signal }))) as unknown[];
  }

  async inspectService(id: string, signal?: AbortSignal): Promise<unknown> {
    signal?.throwIfAborted();
    return this.call(`inspect service ${id}`, () => this.docker.getService(id).inspect());
  }

  async updateService(id: string, version: number, spec: unknown, signal?: AbortSignal, auth?: RegistryCredentials | null): Promise<void> {
    const service = this.docker.getService(id);
    // As updateNode: _query is the query string (version), _body the whole spec; authconfig
    // becomes the X-Registry-Auth header (docker-modem), never part of the query or the body.
    const update = service.update as unknown as (this: Docker.Service, opts: unknown) => Promise<unknown>;
    await this.call(`update service ${id}`, () => update.call(service, { _query: { version }, _body: spec, abortSignal: signal, ...(auth ? { authconfig: { ...auth } } : {}) }));
  }

  async listTasks(filters: Record<string, string[]>, signal?: AbortSignal): Promise<unknown[]> {
    return (await this.call("list tasks", () => (this.docker.listTasks as unknown as (this: Docker, o: unknown) => Promise<unknown>).call(this.docker, { filters, abortSignal: signal }))) as unknown[];
  }

  // ---- swarm secrets and configs (issue 20, w7) ----
  async listSwarmObjects(kind: "secret" | "config", signal?: AbortSignal): Promise<unknown[]> {
    const list = (kind === "secret" ? this.docker.listSecrets : this.docker.listConfigs) as unknown as WithSignal<unknown>;
    return (await this.call(`list ${kind}s`, () => list.call(this.docker, { abortSignal: signal }))) as unknown[];
  }

  async createSwarmObject(kind: "secret" | "config", spec: { Name: string; Labels: Record<string, string>; Data: string }, signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    // The name only in the error text: the spec carries the data.
    const made = (await this.call(`create ${kind} ${spec.Name}`, () => (kind === "secret" ? this.docker.createSecret(spec) : this.docker.createConfig(spec)))) as { id?: unknown };
    return String(made?.id ?? "");
  }

  async removeSwarmObject(kind: "secret" | "config", id: string, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    await this.call(`remove ${kind} ${id}`, () => (kind === "secret" ? this.docker.getSecret(id).remove() : this.docker.getConfig(id).remove()));
  }

  async swarmEvents(window: { since: string; until: string; types: readonly string[] }, signal?: AbortSignal): Promise<Record<string, unknown>[]> {
    const what = "read events";
    const stream = await this.call(what, () =>
      new Promise<NodeJS.ReadableStream>((resolve, reject) =>
        this.docker.modem.dial(
          {
            path: "/events?",
            method: "GET",
            isStream: true,
            abortSignal: signal,
            statusCodes: { 200: true, 400: "bad parameter", 500: "server error" },
            options: { since: window.since, until: window.until, filters: JSON.stringify({ type: window.types }) },
          } as unknown as Parameters<Docker["modem"]["dial"]>[0],
          (err: unknown, data: unknown) => (err ? reject(err) : resolve(data as NodeJS.ReadableStream)),
        ),
      ),
    );
    return this.call(what, () => readEventLines(stream, EVENTS_MAX_BYTES, signal));
  }

  async checkAuth(auth: RegistryCredentials, signal?: AbortSignal): Promise<{ status: string }> {
    const res = (await this.call(`log in to ${auth.serveraddress}`, () => this.docker.checkAuth({ ...auth, abortSignal: signal }))) as { Status?: unknown } | undefined;
    return { status: typeof res?.Status === "string" ? res.Status : "Login Succeeded" };
  }

  async pullImage(ref: string, onLine: (line: string) => void, signal?: AbortSignal, auth?: RegistryCredentials | null): Promise<void> {
    const what = `pull image ${ref}`;
    const stream = (await this.call(what, () =>
      this.docker.pull(ref, { abortSignal: signal, ...(auth ? { authconfig: { ...auth } } : {}) }),
    )) as NodeJS.ReadableStream;
    // Layer progress ("Downloading 3MB/20MB") repeats many times a second; say each status change once.
    const lastStatus = new Map<string, string>();
    await this.call(what, () =>
      readJsonLines(stream, signal, (msg) => {
        if (msg.error || msg.errorDetail) throw new EngineError(`${what}: ${String(msg.errorDetail?.message ?? msg.error).trim()}`);
        if (typeof msg.status !== "string") return;
        const layer = typeof msg.id === "string" ? msg.id : "";
        if (lastStatus.get(layer) === msg.status) return;
        lastStatus.set(layer, msg.status);
        onLine(layer ? `${layer}: ${msg.status}` : msg.status);
      }),
    );
  }

  async pushImage(
    repository: string,
    tag: string,
    auth: RegistryCredentials | null,
    onLine: (line: string) => void,
    signal?: AbortSignal,
  ): Promise<{ digest: string | null }> {
    const what = `push image ${repository}:${tag}`;
    const stream = (await this.call(what, () =>
      // The engine wants the header even for an anonymous push (it reads the body otherwise).
      this.docker.getImage(repository).push({ tag, abortSignal: signal, authconfig: auth ? { ...auth } : {} } as Docker.ImagePushOptions),
    )) as NodeJS.ReadableStream;
    let digest: string | null = null;
    const lastStatus = new Map<string, string>();
    await this.call(what, () =>
      readJsonLines(stream, signal, (msg) => {
        if (msg.error || msg.errorDetail) throw new EngineError(`${what}: ${String(msg.errorDetail?.message ?? msg.error).trim()}`);
        const aux = msg.aux as { Digest?: unknown } | undefined;
        if (typeof aux?.Digest === "string" && /^sha256:[a-f0-9]{64}$/.test(aux.Digest)) digest = aux.Digest;
        if (typeof msg.status !== "string") return;
        const layer = typeof msg.id === "string" ? msg.id : "";
        if (lastStatus.get(layer) === msg.status) return;
        lastStatus.set(layer, msg.status);
        onLine(layer ? `${layer}: ${msg.status}` : msg.status);
      }),
    );
    return { digest };
  }

  async listImages(labels: Record<string, string>, signal?: AbortSignal): Promise<ImageSummary[]> {
    const label = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
    const list = await this.call("list images", () => this.docker.listImages({ filters: { label }, abortSignal: signal } as Docker.ListImagesOptions));
    return list.map((i) => ({ id: i.Id, tags: (i.RepoTags ?? []).filter((t) => t !== "<none>:<none>"), labels: i.Labels ?? {}, created: i.Created }));
  }

  async removeImage(idOrRef: string, signal?: AbortSignal, opts: { keepParents?: boolean } = {}): Promise<void> {
    await this.call(`remove image ${idOrRef}`, () =>
      this.docker.getImage(idOrRef).remove({ force: true, ...(opts.keepParents ? { noprune: true } : {}), abortSignal: signal } as Docker.ImageRemoveOptions),
    );
  }

  async tagImage(source: string, repository: string, tag: string, signal?: AbortSignal): Promise<void> {
    await this.call(`tag image ${source}`, () => this.docker.getImage(source).tag({ repo: repository, tag, abortSignal: signal } as Docker.ImageTagOptions));
  }

  async stopContainer(id: string, timeoutS: number, signal?: AbortSignal): Promise<void> {
    try {
      await this.call(`stop container ${id.slice(0, 12)}`, () => this.docker.getContainer(id).stop({ t: timeoutS, abortSignal: signal }));
    } catch (err) {
      if (err instanceof EngineError && err.statusCode === 304) return; // already stopped
      throw err;
    }
  }

  async restartContainer(id: string, timeoutS: number, signal?: AbortSignal): Promise<void> {
    await this.call(`restart container ${id.slice(0, 12)}`, () => this.docker.getContainer(id).restart({ t: timeoutS, abortSignal: signal }));
  }

  async containerLogs(id: string, opts: ContainerLogsQuery, signal?: AbortSignal): Promise<{ lines: string[]; truncated: boolean }> {
    const what = `logs of container ${id.slice(0, 12)}`;
    // Streamed (not the buffered form) so a huge log is cut at maxBytes instead of held whole.
    const stream = await this.call(what, () =>
      new Promise<NodeJS.ReadableStream>((resolve, reject) =>
        this.docker.modem.dial(
          {
            path: `/containers/${encodeURIComponent(id)}/logs?`,
            method: "GET",
            isStream: true,
            abortSignal: signal,
            statusCodes: { 200: true, 404: "no such container", 500: "server error" },
            options: { stdout: true, stderr: true, follow: false, since: opts.since, tail: opts.tail, timestamps: opts.timestamps },
          } as unknown as Parameters<Docker["modem"]["dial"]>[0],
          (err: unknown, data: unknown) => (err ? reject(err) : resolve(data as NodeJS.ReadableStream)),
        ),
      ),
    );
    return this.call(what, () => readLogFrames(stream, opts.maxBytes, signal));
  }

  async ensureVolume(spec: { name: string; labels: Record<string, string> }, signal?: AbortSignal): Promise<{ name: string; created: boolean }> {
    try {
      await this.call(`inspect volume ${spec.name}`, () => this.docker.getVolume(spec.name).inspect({ abortSignal: signal }));
      return { name: spec.name, created: false };
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    // Creating an existing volume is a no-op for the engine: a racing creator is harmless.
    await this.call(`create volume ${spec.name}`, () => this.docker.createVolume({ Name: spec.name, Labels: spec.labels, abortSignal: signal } as Docker.VolumeCreateOptions));
    return { name: spec.name, created: true };
  }

  async listVolumes(labels: Record<string, string>, signal?: AbortSignal): Promise<VolumeSummary[]> {
    const label = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
    const res = await this.call("list volumes", () => this.docker.listVolumes({ filters: { label }, abortSignal: signal } as Docker.VolumeListOptions));
    return (res.Volumes ?? []).map((v) => ({ name: v.Name, labels: v.Labels ?? {} }));
  }

  async removeVolume(name: string, signal?: AbortSignal): Promise<void> {
    await this.call(`remove volume ${name}`, () => this.docker.getVolume(name).remove({ abortSignal: signal }));
  }

  async putFile(containerId: string, dir: string, name: string, content: Buffer, signal?: AbortSignal, mode = 0o600): Promise<void> {
    const tar = singleFileTar(name, content, mode);
    await this.call(`copy ${name} into container ${containerId.slice(0, 12)}`, () =>
      this.docker.getContainer(containerId).putArchive(tar, { path: dir, abortSignal: signal }),
    );
  }

  async containersOfImage(idOrRef: string, signal?: AbortSignal): Promise<ContainerSummary[]> {
    let id: string;
    try {
      id = (await this.call(`inspect image ${idOrRef}`, () => this.docker.getImage(idOrRef).inspect({ abortSignal: signal } as object))).Id;
    } catch (err) {
      if (isNotFound(err)) return [];
      throw err;
    }
    const list = await this.call("list containers", () => this.docker.listContainers({ all: true, abortSignal: signal }));
    // By image id: a container keeps its image's id when the tag moves on.
    return list
      .filter((c) => c.ImageID === id)
      .map((c) => ({ id: c.Id, name: (c.Names[0] ?? "").replace(/^\//, ""), image: c.Image, state: c.State, labels: c.Labels ?? {} }));
  }

  async execStream(containerId: string, spec: ExecSpec, signal?: AbortSignal): Promise<ExecSession> {
    // Docker does not stop an exec's process when its client goes away (measured: a pg_dump
    // waiting for a lock ran on after the connection closed). The marker in its environment
    // lets a second exec find and signal it, and whatever it started, when the session ends
    // early; children inherit it, and a reused pid cannot carry it.
    return this.openExec(containerId, spec, signal, `${EXEC_MARKER_VAR}=${randomBytes(16).toString("hex")}`);
  }

  /** execStream; `marker` null: the helper execs that signal other execs (never stopped themselves). */
  private async openExec(containerId: string, spec: ExecSpec, signal: AbortSignal | undefined, marker: string | null): Promise<ExecSession> {
    const what = `exec ${spec.cmd[0] ?? ""} in container ${containerId.slice(0, 12)}`;
    signal?.throwIfAborted();
    const container = this.docker.getContainer(containerId);
    const withStdin = spec.stdin != null;
    const exec = await this.call(what, () =>
      container.exec({
        Cmd: spec.cmd,
        Env: [...Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`), ...(marker ? [marker] : [])],
        AttachStdout: true,
        AttachStderr: true,
        AttachStdin: withStdin,
        Tty: false,
        ...(spec.user ? { User: spec.user } : {}),
        abortSignal: signal,
      } as Docker.ExecCreateOptions),
    );
    /** Stops the process and its children: whether there was one to stop, and a reason when that failed. */
    const stopProcess = async (): Promise<Stopped> => {
      if (!marker) return { signalled: false, note: null };
      try {
        return { signalled: await this.stopMarked(containerId, marker, spec.user), note: null };
      } catch (err) {
        return { signalled: true, note: `the process in the container could not be stopped: ${(err as Error).message}` };
      }
    };
    let socket: import("node:stream").Duplex;
    try {
      socket = (await this.call(what, () =>
        exec.start({ hijack: true, stdin: withStdin, Detach: false, Tty: false, abortSignal: signal }),
      )) as import("node:stream").Duplex;
    } catch (err) {
      // Aborted while starting: the engine may have started the process all the same.
      if (signal?.aborted) {
        const { note } = await stopProcess();
        if (note) throw new EngineError(`${this.wrap(err, what).message}; ${note}`, null, "ABORT_ERR");
      }
      throw err;
    }
    const demux = new ExecDemux(spec.stderrLimit);
    // Failures reach the caller through demux.stdout (ExecDemux passes its destroy error on to
    // it). Without a listener here the same error would also be rethrown as an uncaught
    // exception: `pipe` rethrows errors of a destination that has no other listener.
    demux.on("error", () => undefined);
    let stopping: Promise<Stopped> | null = null;
    let stopReason: Error | null = null;
    /**
     * Ends the session before the process ended (abort, broken input, output given up): the
     * process is stopped first and only then is the connection closed. Closing it first would
     * give the process a clean end of stdin, which a restore tool takes for a complete input.
     */
    const stop = (reason: Error): Promise<Stopped> => {
      stopReason ??= reason;
      stopping ??= (async () => {
        const stopped = await stopProcess();
        socket.destroy();
        demux.destroy(reason);
        return stopped;
      })();
      return stopping;
    };
    const onAbort = () => void stop(new EngineError(`${what}: aborted`, null, "ABORT_ERR"));
    if (signal?.aborted) onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    socket.on("error", (err) => void stop(err));
    // The engine ends the stream when the process's stdout and stderr closed.
    socket.on("end", () => {
      if (!demux.destroyed) demux.end();
    });
    socket.on("close", () => {
      if (!demux.writableEnded && !demux.destroyed) demux.end();
    });
    socket.pipe(demux, { end: false });
    if (withStdin) {
      const input = spec.stdin!;
      input.on("error", (err) => void stop(err as Error));
      input.pipe(socket as NodeJS.WritableStream, { end: false });
      // Half-close: the process sees EOF on stdin and can still write its output.
      input.on("end", () => socket.end());
    }
    const done = new Promise<ExecOutcome>((resolve, reject) => {
      let settled = false;
      const finish = async (err?: Error | null) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener("abort", onAbort);
        // Settles only once a stopped process is gone: nothing runs on after the caller moved on.
        const stopped = stopping ? await stopping : null;
        const reason = err ?? stopReason;
        if (stopped?.note) return reject(new EngineError(`${this.wrap(reason ?? new Error("ended early"), what).message}; ${stopped.note}`));
        // Stopped by us: its exit code (143, 137) says only that; the reason is why we stopped it.
        if (stopped?.signalled && reason) return reject(this.wrap(reason, what));
        // Aborted: the output may have ended cleanly because the process was stopped; that is
        // not the process's own end.
        if (signal?.aborted) return reject(err ? this.wrap(err, what) : new EngineError(`${what}: aborted`, null, "ABORT_ERR"));
        let exitCode: number | null = null;
        try {
          exitCode = await this.execExitCode(exec, signal);
        } catch (e) {
          if (!err) return reject(this.wrap(e, what));
        }
        // A process that failed closes its side early (the stdin feed then breaks): its exit code
        // and stderr are the reason, not the broken pipe.
        if (err && (exitCode === null || exitCode === 0)) return reject(this.wrap(err, what));
        resolve({ exitCode, stderr: demux.stderr() });
      };
      /**
       * stdout destroyed by its consumer before the end (its pipeline failed, or an async
       * iterator was left early, which destroys with an AbortError): the process is stopped
       * rather than left running on unread (one that writes nothing would never notice).
       */
      const givenUp = () => {
        const reason = new EngineError(`${what}: output closed before the process ended`);
        void stop(reason);
        void finish(reason);
      };
      demux.stdout.on("end", () => void finish());
      // Errors that are not ours (stop() sets its reason before it destroys) are the consumer's.
      demux.stdout.on("error", (err) => (stopReason ? void finish(err) : givenUp()));
      demux.stdout.on("close", () => {
        if (demux.stdout.readableEnded || stopReason) return;
        givenUp();
      });
    });
    // The caller may never await `done` when its own pipeline failed first.
    done.catch(() => {});
    return { stdout: demux.stdout, done };
  }

  /**
   * Stops the processes of one exec (found by their marker): SIGTERM, up to EXEC_STOP_GRACE_MS
   * for them to go, then SIGKILL. Run as the exec's user, who may signal its own processes and
   * read their environment. False when none was left; throws when they cannot be signalled or
   * outlive SIGKILL.
   */
  private async stopMarked(containerId: string, marker: string, user: string | undefined): Promise<boolean> {
    const send = async (sig: "TERM" | "KILL" | "0"): Promise<number> => {
      let s: ExecSession;
      try {
        s = await this.openExec(containerId, { cmd: ["sh", "-c", SIGNAL_MARKED_SCRIPT, "sh", marker, sig], ...(user ? { user } : {}) }, AbortSignal.timeout(EXEC_SIGNAL_TIMEOUT_MS), null);
      } catch (err) {
        // A container that is not running has no processes left.
        if (isConflict(err) && /is not running|is restarting/i.test((err as Error).message)) return 0;
        throw err;
      }
      let out = "";
      for await (const chunk of s.stdout as AsyncIterable<Buffer>) out += chunk.toString("utf8");
      const o = await s.done;
      if (o.exitCode !== 0) throw new Error(`sh exited with ${o.exitCode ?? "no exit code"}${o.stderr.trim() ? `: ${o.stderr.trim()}` : ""}`);
      return out.split("\n").filter((l) => /^\d+$/.test(l)).length;
    };
    if ((await send("TERM")) === 0) return false;
    const until = Date.now() + EXEC_STOP_GRACE_MS;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, 200));
      if ((await send("0")) === 0) return true;
    }
    await send("KILL");
    await new Promise((r) => setTimeout(r, 200));
    const left = await send("0");
    if (left > 0) throw new Error(`${left} process(es) still there after SIGKILL`);
    return true;
  }

  /** The exit code once the engine marks the exec finished (shortly after its streams close). */
  private async execExitCode(exec: Docker.Exec, signal?: AbortSignal): Promise<number | null> {
    for (let i = 0; i < 100; i++) {
      const info = await exec.inspect({ abortSignal: signal } as object);
      if (!info.Running) return info.ExitCode ?? null;
      await new Promise((r) => setTimeout(r, 50));
    }
    return null;
  }

  async getArchive(containerId: string, path: string, signal?: AbortSignal): Promise<NodeJS.ReadableStream> {
    return this.call(`read ${path} from container ${containerId.slice(0, 12)}`, () =>
      this.docker.getContainer(containerId).getArchive({ path, abortSignal: signal } as { path: string }),
    );
  }

  async putArchive(containerId: string, dir: string, tar: NodeJS.ReadableStream, signal?: AbortSignal): Promise<void> {
    await this.call(`write into ${dir} of container ${containerId.slice(0, 12)}`, () =>
      this.docker.getContainer(containerId).putArchive(tar as unknown as NodeJS.ReadableStream, { path: dir, abortSignal: signal } as { path: string }),
    );
  }
}

/** Exposed ports: the declared ones and the published ones (the engine wants both listed). */
function exposedPortsOf(spec: CreateContainerSpec): Record<string, object> | undefined {
  const ports = new Set([...(spec.exposedPorts ?? []), ...(spec.publish ?? []).map((p) => p.port)]);
  return ports.size ? Object.fromEntries([...ports].map((p) => [`${p}/tcp`, {}])) : undefined;
}

// clusters (issue 20)
/** A node as GET /nodes and GET /nodes/{id} describe it, in the agent's report shape. */
export function swarmNodeOf(raw: unknown): SwarmNode {
  const n = raw as {
    ID?: string;
    Version?: { Index?: number };
    Spec?: { Role?: string; Availability?: string; Labels?: Record<string, string> | null };
    Description?: { Hostname?: string; Engine?: { EngineVersion?: string } };
    Status?: { State?: string; Addr?: string };
    ManagerStatus?: { Leader?: boolean; Reachability?: string } | null;
  };
  const availability = n.Spec?.Availability;
  return {
    id: String(n.ID ?? ""),
    version: typeof n.Version?.Index === "number" ? n.Version.Index : 0,
    hostname: n.Description?.Hostname ?? "",
    role: n.Spec?.Role === "manager" ? "manager" : "worker",
    availability: availability === "pause" || availability === "drain" ? availability : "active",
    status: n.Status?.State ?? "unknown",
    addr: n.Status?.Addr || null,
    engine_version: n.Description?.Engine?.EngineVersion || null,
    labels: n.Spec?.Labels ?? {},
    reachability: n.ManagerStatus ? (n.ManagerStatus.Reachability ?? "unknown") : null,
    leader: n.ManagerStatus?.Leader === true,
  };
}

/** The engine's swarm role from its info's Swarm section; null when the engine does not say. */
export function swarmRoleOf(swarm: unknown): SwarmRole | null {
  const s = swarm as { LocalNodeState?: unknown; ControlAvailable?: unknown } | undefined;
  if (!s || typeof s.LocalNodeState !== "string") return null;
  if (s.LocalNodeState !== "active") return "inactive";
  return s.ControlAvailable === true ? "manager" : "worker";
}

/** An engine network inspection as the agent reports it (first IPv4 pool; container IPs without prefix length). */
export function networkDetailsOf(n: Docker.NetworkInspectInfo): NetworkDetails {
  const ipv4 = (n.IPAM?.Config ?? []).find((c) => c.Subnet && !c.Subnet.includes(":"));
  const containers = Object.entries(n.Containers ?? {})
    // Swarm's load-balancer endpoints ("lb-<network>") are not containers.
    .filter(([id]) => !id.startsWith("lb-"))
    .map(([id, c]) => ({ id, name: c.Name, ipv4: c.IPv4Address ? c.IPv4Address.split("/")[0]! : null }))
    .sort((a, b) => a.name.localeCompare(b.name));
  return {
    id: n.Id,
    name: n.Name,
    driver: n.Driver,
    created: n.Created,
    labels: n.Labels ?? {},
    scope: n.Scope,
    internal: n.Internal === true,
    attachable: n.Attachable === true,
    options: n.Options ?? {},
    subnet: ipv4?.Subnet ?? null,
    gateway: ipv4?.Gateway ?? null,
    containers,
  };
}

/** A bound on one events answer (the engine keeps a few hundred events; each well under 4 KiB). */
const EVENTS_MAX_BYTES = 16 * 1024 * 1024;

/** The engine's newline-delimited JSON events, timeNano kept as its exact decimal text; ends at the stream's end. */
export async function readEventLines(stream: NodeJS.ReadableStream, maxBytes: number, signal?: AbortSignal): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  let rest = "";
  let bytes = 0;
  const take = (line: string) => {
    if (!line.trim()) return;
    const parsed = JSON.parse(line) as Record<string, unknown>;
    const nano = /"timeNano"\s*:\s*(\d+)/.exec(line);
    out.push({ ...parsed, timeNano: nano ? nano[1] : String(parsed.timeNano ?? "") });
  };
  for await (const chunk of stream as AsyncIterable<Buffer | string>) {
    signal?.throwIfAborted();
    const text = typeof chunk === "string" ? chunk : chunk.toString("utf8");
    bytes += Buffer.byteLength(text);
    if (bytes > maxBytes) {
      (stream as unknown as { destroy?: () => void }).destroy?.();
      throw new Error(`the events answer exceeded ${maxBytes} bytes`);
    }
    const lines = (rest + text).split("\n");
    rest = lines.pop() ?? "";
    lines.forEach(take);
  }
  take(rest);
  return out;
}
