import type { SwarmNode, SwarmRole } from "@capstan/shared";

/**
 * The agent's narrow view of the local Docker Engine. Handlers depend on these interfaces only
 * (unit tests fake them); DockerodeEngine (dockerode-engine.ts) implements them over the
 * engine's unix socket. The view is grouped by role so a module can ask for the part it uses
 * (a swarm role joins as one more group). Names are matched exactly:
 * `inspectContainer("x")` never returns a container whose id merely starts with "x", and
 * `listNetworks("x")` never returns "x2" (the engine's name filter is a substring match, and
 * the engine allows several networks with one name).
 */
export interface Engine extends EngineSystem, ContainerEngine, ImageEngine, NetworkEngine, VolumeEngine, ExecEngine, SwarmEngine {}

/** The engine itself: where it is, whether it answers, what it is. */
export interface EngineSystem {
  readonly socketPath: string;
  ping(signal?: AbortSignal): Promise<void>;
  version(signal?: AbortSignal): Promise<EngineVersion>;
  info(signal?: AbortSignal): Promise<EngineInfo>;
  /** `docker compose version --short`, or null when the compose plugin is absent. */
  composeVersion(signal?: AbortSignal): Promise<string | null>;
}

/** Containers: lifecycle, logs, files, restart policy. */
export interface ContainerEngine {
  /** All containers (any state) carrying every given label. */
  listContainers(labels: Record<string, string>, signal?: AbortSignal): Promise<ContainerSummary[]>;
  /** The container with exactly this name, or null. */
  inspectContainer(name: string, signal?: AbortSignal): Promise<ContainerDetails | null>;
  /** Creates (does not start) a container; throws EngineError 409 when the name is taken. */
  createContainer(spec: CreateContainerSpec, signal?: AbortSignal): Promise<{ id: string }>;
  /** Starts it; one already running is fine. */
  startContainer(id: string, signal?: AbortSignal): Promise<void>;
  unpauseContainer(id: string, signal?: AbortSignal): Promise<void>;
  /** Force-removes; throws EngineError 404 when it is gone. */
  removeContainer(id: string, signal?: AbortSignal): Promise<void>;
  /** Stops gracefully (SIGTERM, then SIGKILL after timeoutS); an already stopped container is fine. */
  stopContainer(id: string, timeoutS: number, signal?: AbortSignal): Promise<void>;
  restartContainer(id: string, timeoutS: number, signal?: AbortSignal): Promise<void>;
  /** Recent log lines, stdout and stderr demultiplexed, oldest first, bounded by opts.maxBytes. */
  containerLogs(id: string, opts: ContainerLogsQuery, signal?: AbortSignal): Promise<{ lines: string[]; truncated: boolean }>;
  /** The container's restart policy name, or null when it does not exist. */
  restartPolicy(id: string): Promise<string | null>;
  /** Sets restart policy "no" (a stood-down agent must not be restarted by the engine). */
  disableRestart(id: string): Promise<void>;
  /** Containers (any state) whose image is this one (by id or reference); none when the image is gone. */
  containersOfImage(idOrRef: string, signal?: AbortSignal): Promise<ContainerSummary[]>;
  /**
   * Writes one file (owner root, `mode`, default 600) into an existing directory of a container,
   * created or running (a volume mounted there receives it). For secrets a process must read
   * from a file: nothing of it shows in the container's config or argv.
   */
  putFile(containerId: string, dir: string, name: string, content: Buffer, signal?: AbortSignal, mode?: number): Promise<void>;
  /** A path of a container (file or directory) as the engine's tar stream (GET archive). */
  getArchive(containerId: string, path: string, signal?: AbortSignal): Promise<NodeJS.ReadableStream>;
  /** Extracts a tar stream into an existing directory of a container, created or stopped too (PUT archive). */
  putArchive(containerId: string, dir: string, tar: NodeJS.ReadableStream, signal?: AbortSignal): Promise<void>;
}

/** Images: build, pull, push, list, remove. */
export interface ImageEngine {
  imageExists(ref: string, signal?: AbortSignal): Promise<boolean>;
  /**
   * Builds an image from a tar stream of the build context. `onLine` gets each output line;
   * resolves with the image id, throws EngineError with the engine's message on a failed step.
   * Aborting the signal aborts the request, which makes the engine stop the build.
   */
  buildImage(context: NodeJS.ReadableStream, opts: BuildImageOptions, onLine: (line: string) => void, signal?: AbortSignal): Promise<{ id: string | null }>;
  /**
   * Pulls an image; `onLine` gets the engine's progress messages (status per layer). `auth`
   * goes to the engine in the X-Registry-Auth header only.
   */
  pullImage(ref: string, onLine: (line: string) => void, signal?: AbortSignal, auth?: RegistryCredentials | null): Promise<void>;
  /**
   * Pushes `repository:tag` to its registry with `auth` (X-Registry-Auth header only); `onLine`
   * gets the progress. Resolves with the digest the registry reported (null when none), throws
   * EngineError with the registry's message. Aborting the signal aborts the push.
   */
  pushImage(repository: string, tag: string, auth: RegistryCredentials | null, onLine: (line: string) => void, signal?: AbortSignal): Promise<{ digest: string | null }>;
  // registries (issue 18)
  /**
   * Logs in to a registry through the engine (POST /auth: the engine performs the registry's
   * handshake), as `docker login` does; the password goes in the request body only. Resolves
   * with the engine's status ("Login Succeeded"), throws EngineError with the registry's reason.
   */
  checkAuth(auth: RegistryCredentials, signal?: AbortSignal): Promise<{ status: string }>;
  /** Images carrying every given label. */
  listImages(labels: Record<string, string>, signal?: AbortSignal): Promise<ImageSummary[]>;
  /**
   * Removes an image (by id or reference); throws EngineError 404 when it is gone, 409 when in use.
   * `keepParents` leaves its untagged parent images (the classic builder's build cache).
   */
  removeImage(idOrRef: string, signal?: AbortSignal, opts?: { keepParents?: boolean }): Promise<void>;
  /** Tags a local image `source` as `repository:tag` (an image pulled from the default registry keeps the name it was asked by). */
  tagImage(source: string, repository: string, tag: string, signal?: AbortSignal): Promise<void>;
}

/** Networks: the platform's own and the engine's. */
export interface NetworkEngine {
  /** Networks named exactly `name` (the engine allows duplicates), oldest first. */
  listNetworks(name: string, signal?: AbortSignal): Promise<NetworkSummary[]>;
  createNetwork(spec: CreateNetworkSpec, signal?: AbortSignal): Promise<{ id: string }>;
  inspectNetwork(idOrName: string, signal?: AbortSignal): Promise<NetworkSummary | null>;
  removeNetwork(id: string, signal?: AbortSignal): Promise<void>;
  /** Every network on the engine (no containers: the engine's list leaves them out). */
  listAllNetworks(signal?: AbortSignal): Promise<NetworkSummary[]>;
  /** Full inspection (scope, IPAM, options, attached containers), or null when it is gone. */
  inspectNetworkDetails(idOrName: string, signal?: AbortSignal): Promise<NetworkDetails | null>;
  /** Attaches a container (created or running); throws EngineError 403/409 when already attached. */
  connectNetwork(network: string, container: string, signal?: AbortSignal): Promise<void>;
  /** Detaches a container (force: also when it is not running); throws when it is not attached. */
  disconnectNetwork(network: string, container: string, force: boolean, signal?: AbortSignal): Promise<void>;
}

/** Named volumes. */
export interface VolumeEngine {
  /** Creates a named volume unless it exists; `created` false when it did. */
  ensureVolume(spec: { name: string; labels: Record<string, string> }, signal?: AbortSignal): Promise<{ name: string; created: boolean }>;
  /** Volumes carrying every given label. */
  listVolumes(labels: Record<string, string>, signal?: AbortSignal): Promise<VolumeSummary[]>;
  /** Removes a volume; throws EngineError 404 when it is gone, 409 when in use. */
  removeVolume(name: string, signal?: AbortSignal): Promise<void>;
}

// clusters (issue 20)
/** A node's spec as the engine takes it back whole on update (POST /nodes/{id}/update). */
export interface SwarmNodeSpec {
  Name?: string;
  Labels: Record<string, string>;
  Role: "manager" | "worker";
  Availability: "active" | "pause" | "drain";
}

/** Swarm: membership and nodes (a manager's view; a worker's engine answers 503 to these). */
export interface SwarmEngine {
  /** The swarm's id and spec name (GET /swarm), or null when this engine is no manager of one. */
  inspectSwarm(signal?: AbortSignal): Promise<{ id: string; name: string | null } | null>;
  /** Every node (GET /nodes), by hostname. */
  listNodes(signal?: AbortSignal): Promise<SwarmNode[]>;
  /** One node with its spec (GET /nodes/{id}); throws EngineError 404 when there is none. */
  inspectNode(id: string, signal?: AbortSignal): Promise<{ node: SwarmNode; spec: SwarmNodeSpec }>;
  /**
   * Replaces the node's spec at `version`; throws EngineError (500, "update out of sequence")
   * when the node changed since that version (isOutOfSequence).
   */
  updateNode(id: string, version: number, spec: SwarmNodeSpec, signal?: AbortSignal): Promise<void>;
  // ---- swarm services (issue 20): the engine's objects as it answers them (mapped by handlers/swarm.ts) ----
  /** GET /services. */
  listServices(signal?: AbortSignal): Promise<unknown[]>;
  /** GET /services/{id}; throws EngineError 404 when there is none. */
  inspectService(id: string, signal?: AbortSignal): Promise<unknown>;
  /**
   * POST /services/{id}/update?version=N with the whole spec; "update out of sequence" as for nodes.
   * `auth` (w7): the registry login sent in X-Registry-Auth, which the swarm hands to every node
   * that pulls the service's image (as `docker service update --with-registry-auth`).
   */
  updateService(id: string, version: number, spec: unknown, signal?: AbortSignal, auth?: RegistryCredentials | null): Promise<void>;
  /** GET /tasks with filters (e.g. service). */
  listTasks(filters: Record<string, string[]>, signal?: AbortSignal): Promise<unknown[]>;
  // ---- swarm secrets and configs (issue 20, w7): the engine's objects as it answers them ----
  /** GET /secrets or GET /configs (a secret's Spec.Data is never answered by the engine). */
  listSwarmObjects(kind: "secret" | "config", signal?: AbortSignal): Promise<unknown[]>;
  /** POST /secrets/create or /configs/create with {Name, Labels, Data (base64)}; the new id. EngineError 409 when the name is taken. */
  createSwarmObject(kind: "secret" | "config", spec: { Name: string; Labels: Record<string, string>; Data: string }, signal?: AbortSignal): Promise<string>;
  /** DELETE /secrets/{id} or /configs/{id}; EngineError 404 when gone, 400 "in use" when a service mounts it. */
  removeSwarmObject(kind: "secret" | "config", id: string, signal?: AbortSignal): Promise<void>;
  // ---- swarm events (issue 20, w7/events) ----
  /**
   * GET /events?since=&until=&filters={"type":[...]}: finite (the engine answers what it keeps
   * between the two and ends at until). Each event as the engine wrote it, but timeNano as the
   * exact decimal text (a JSON number that large loses digits when parsed).
   */
  swarmEvents(window: { since: string; until: string; types: readonly string[] }, signal?: AbortSignal): Promise<Record<string, unknown>[]>;
}

/** The engine's answer to an update naming a version that is no longer the object's. */
export const isOutOfSequence = (err: unknown): boolean => err instanceof EngineError && /update out of sequence/i.test(err.message);

/** Processes run inside a running container (backups, restores, database tools). */
export interface ExecEngine {
  /**
   * Runs `spec.cmd` (argv, no shell, no TTY) in a running container. stdout comes back as a
   * stream with backpressure (a slow reader pauses the process); stderr is kept, bounded, for
   * the failure reason; `spec.stdin` is streamed to the process and ended (EOF) when it ends.
   * `done` settles once the output ended, with the exit code: the caller decides what a
   * non-zero code means (never ignore it). Aborting the signal, a failing stdin, or giving up
   * stdout before its end stops the process in the container (SIGTERM, then SIGKILL; the engine
   * itself would let it run on) before the connection is closed; `done` settles after that.
   */
  execStream(containerId: string, spec: ExecSpec, signal?: AbortSignal): Promise<ExecSession>;
}

export interface ExecSpec {
  cmd: string[];
  /**
   * Variables of the process only. Never credentials: a process's environment is readable
   * through /proc/<pid>/environ and passes to every process it starts. Secrets go over stdin
   * or into a private file (agent/src/backup/engines/secret-file.ts), never into env or cmd.
   */
  env?: Record<string, string>;
  /** default: the container's user */
  user?: string;
  /** Fed to the process's stdin; null/absent: no stdin. */
  stdin?: NodeJS.ReadableStream | null;
  /** Bytes of stderr kept for the outcome (the newest); default 16 KiB. */
  stderrLimit?: number;
}

export interface ExecOutcome {
  /** null when the engine did not report one (the process outlived its streams). */
  exitCode: number | null;
  stderr: string;
}

export interface ExecSession {
  stdout: NodeJS.ReadableStream & import("node:stream").Readable;
  /** Settles after stdout ended (or failed); rejects when the streams broke. */
  done: Promise<ExecOutcome>;
}

/** A registry login, as the engine takes it (serveraddress: the registry's host[:port]). */
export interface RegistryCredentials {
  username: string;
  password: string;
  serveraddress: string;
}

export interface BuildImageOptions {
  /** Path of the Dockerfile inside the context. */
  dockerfile: string;
  tag: string;
  buildargs: Record<string, string>;
  nocache: boolean;
  labels: Record<string, string>;
  /** Registry logins for the base images of the build (X-Registry-Config), keyed by registry. */
  registryConfig?: Record<string, RegistryCredentials>;
}

export interface ImageSummary {
  id: string;
  tags: string[];
  labels: Record<string, string>;
  /** Unix seconds when the image was built. */
  created?: number;
}

export interface VolumeSummary {
  name: string;
  labels: Record<string, string>;
}

export interface ContainerLogsQuery {
  /** Unix seconds; 0 = from the start. */
  since: number;
  tail: number;
  timestamps: boolean;
  /** Stop reading after this many bytes of log text (the rest is reported as truncated). */
  maxBytes: number;
}

export interface ContainerMount {
  type: "volume" | "bind";
  /** Volume name or host path. */
  source: string;
  target: string;
}

export interface ContainerHealthcheck {
  /** e.g. ["CMD-SHELL", "..."] */
  test: string[];
  intervalS: number;
  timeoutS: number;
  retries: number;
  startPeriodS: number;
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
  /** manager when this engine can run swarm control (Swarm.ControlAvailable), worker when merely joined. */
  swarmRole?: SwarmRole | null;
  // clusters (issue 20)
  /** This engine's swarm node id (Swarm.NodeID); null when it is in no swarm. */
  swarmNodeId?: string | null;
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
  /** How often the engine restarted it (restart policy). */
  restartCount?: number;
  exitCode?: number | null;
  /** RFC 3339; the engine's zero time when it never started. */
  startedAt?: string | null;
  /** Output of the newest health probe, when the container has a health check. */
  healthOutput?: string | null;
  /** Names of the networks it is attached to. */
  networks?: string[];
  /** (resource restores, w7/restore) its volume and bind mounts: what a restore's helper container mounts */
  mounts?: ContainerMount[];
}

export interface CreateContainerSpec {
  name: string;
  image: string;
  cmd?: string[];
  /** (resource restores, w7/restore) replaces the image's entrypoint (a helper container's shell) */
  entrypoint?: string[];
  env?: Record<string, string>;
  labels: Record<string, string>;
  network?: string;
  restart: "no" | "unless-stopped" | "always" | "on-failure";
  /** Container ports to expose (tcp), not published on the host. */
  exposedPorts?: number[];
  mounts?: ContainerMount[];
  healthcheck?: ContainerHealthcheck;
  memoryBytes?: number;
  nanoCpus?: number;
  /** Container ports (tcp) published on the host. */
  publish?: PublishedPort[];
  /** Grace period of the engine's own stops (docker stop without -t, daemon shutdown). */
  stopTimeoutS?: number;
}

export interface PublishedPort {
  /** Port inside the container (tcp). */
  port: number;
  hostPort: number;
  /** Host address to bind, e.g. 0.0.0.0 (all IPv4 addresses) or 127.0.0.1. */
  hostIp: string;
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
  driver: "bridge" | "overlay";
  labels: Record<string, string>;
  /** overlay: standalone containers may join. */
  attachable?: boolean;
  /** Driver options (overlay: `encrypted`). */
  options?: Record<string, string>;
}

export interface NetworkDetails extends NetworkSummary {
  /** local | swarm | global */
  scope: string;
  internal: boolean;
  attachable: boolean;
  options: Record<string, string>;
  /** First IPv4 pool of its IPAM config. */
  subnet: string | null;
  gateway: string | null;
  /** Attached containers on this engine (an overlay's endpoints on other nodes are not listed). */
  containers: { id: string; name: string; ipv4: string | null }[];
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
