import { PassThrough } from "node:stream";
import Docker from "dockerode";
import { EngineError } from "../docker/engine.js";

/**
 * The engine calls only the proxy needs (published ports, a data volume, joining several
 * networks, exec and file copy into its container), over the same socket as the agent's Engine.
 * Kept here rather than in the shared Engine interface: nothing else uses them.
 */
export interface ProxyContainer {
  id: string;
  image: string;
  running: boolean;
  /** The engine's state: created, running, paused, restarting, removing, exited, dead. */
  state: string;
  /** Its environment as KEY=value lines (the official image names its version in CADDY_VERSION). */
  env: string[];
  labels: Record<string, string>;
  /** Names of the networks it is attached to. */
  networks: string[];
  /** "80/tcp" -> host port, as published. */
  ports: Record<string, string>;
}

export interface ProxyCreateSpec {
  name: string;
  image: string;
  env: Record<string, string>;
  labels: Record<string, string>;
  network: string;
  /** container port spec ("80/tcp") -> host port */
  publish: Record<string, number>;
  hostIp: string;
  volume: { name: string; target: string };
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

const OUTPUT_CAP = 1024 * 1024;

export class ProxyDocker {
  private readonly docker: Docker;

  constructor(socketPath: string) {
    this.docker = new Docker({ socketPath });
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      const e = err as { statusCode?: number; json?: { message?: string } | null; message?: string; name?: string; code?: string };
      if (e?.name === "AbortError") throw new EngineError(`${what}: aborted`, null, "ABORT_ERR");
      const detail = (e?.json && typeof e.json === "object" && e.json.message) || e?.message || String(err);
      throw new EngineError(`${what}: ${String(detail).trim()}`, typeof e?.statusCode === "number" ? e.statusCode : null, e?.code ?? null);
    }
  }

  async inspect(name: string, signal?: AbortSignal): Promise<ProxyContainer | null> {
    let c: Docker.ContainerInspectInfo;
    try {
      c = await this.call(`inspect container ${name}`, () => this.docker.getContainer(name).inspect({ abortSignal: signal }));
    } catch (err) {
      if (err instanceof EngineError && err.statusCode === 404) return null;
      throw err;
    }
    if (c.Name !== `/${name}`) return null;
    const ports: Record<string, string> = {};
    for (const [spec, bindings] of Object.entries(c.HostConfig.PortBindings ?? {})) {
      const first = (bindings as { HostPort?: string }[] | null)?.[0];
      if (first?.HostPort) ports[spec] = first.HostPort;
    }
    return {
      id: c.Id,
      image: c.Config.Image,
      running: c.State.Running,
      state: c.State.Status,
      env: c.Config.Env ?? [],
      labels: c.Config.Labels ?? {},
      networks: Object.keys(c.NetworkSettings.Networks ?? {}),
      ports,
    };
  }

  /** Creates the volume, or leaves an existing one of that name as it is (its data is the point). */
  async ensureVolume(name: string, labels: Record<string, string>, signal?: AbortSignal): Promise<void> {
    await this.call(`create volume ${name}`, () =>
      this.docker.createVolume({ Name: name, Labels: labels, abortSignal: signal } as Docker.VolumeCreateOptions),
    );
  }

  async create(spec: ProxyCreateSpec, signal?: AbortSignal): Promise<string> {
    const exposed: Record<string, object> = {};
    const bindings: Record<string, { HostIp: string; HostPort: string }[]> = {};
    for (const [port, host] of Object.entries(spec.publish)) {
      exposed[port] = {};
      bindings[port] = [{ HostIp: spec.hostIp, HostPort: String(host) }];
    }
    const c = await this.call(`create container ${spec.name}`, () =>
      this.docker.createContainer({
        name: spec.name,
        Image: spec.image,
        Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
        Labels: spec.labels,
        ExposedPorts: exposed,
        HostConfig: {
          RestartPolicy: { Name: "unless-stopped" },
          NetworkMode: spec.network,
          PortBindings: bindings,
          Mounts: [{ Type: "volume", Source: spec.volume.name, Target: spec.volume.target }],
        },
        abortSignal: signal,
      }),
    );
    return c.id;
  }

  async start(id: string, signal?: AbortSignal): Promise<void> {
    await this.call(`start container ${id.slice(0, 12)}`, () => this.docker.getContainer(id).start({ abortSignal: signal }));
  }

  async remove(id: string, signal?: AbortSignal): Promise<void> {
    await this.call(`remove container ${id.slice(0, 12)}`, () => this.docker.getContainer(id).remove({ force: true, abortSignal: signal }));
  }

  async connect(network: string, containerId: string, signal?: AbortSignal): Promise<void> {
    await this.call(`connect ${containerId.slice(0, 12)} to network ${network}`, () =>
      this.docker.getNetwork(network).connect({ Container: containerId, abortSignal: signal } as object),
    );
  }

  /**
   * Runs argv in the container (no shell) and collects its output (capped); `stdin`, when
   * given, is its whole input (then end of input). Bounded by timeoutMs and signal; on either,
   * the stream is dropped and the call throws (the command itself should carry its own
   * `timeout` so it does not outlive us inside the container).
   */
  async exec(containerId: string, argv: string[], timeoutMs: number, signal?: AbortSignal, stdin?: string): Promise<ExecResult> {
    const what = `exec ${argv[0]} in ${containerId.slice(0, 12)}`;
    const container = this.docker.getContainer(containerId);
    const exec = await this.call(what, () =>
      container.exec({ Cmd: argv, AttachStdout: true, AttachStderr: true, AttachStdin: stdin !== undefined, Tty: false, abortSignal: signal } as Docker.ExecCreateOptions),
    );
    const stream = await this.call(what, () => exec.start({ hijack: true, stdin: stdin !== undefined, abortSignal: signal }));
    const out = new PassThrough();
    const err = new PassThrough();
    const chunks = { out: [] as Buffer[], err: [] as Buffer[], size: 0 };
    const keep = (into: Buffer[]) => (b: Buffer) => {
      if (chunks.size >= OUTPUT_CAP) return;
      chunks.size += b.length;
      into.push(b);
    };
    out.on("data", keep(chunks.out));
    err.on("data", keep(chunks.err));
    this.docker.modem.demuxStream(stream, out, err);
    // Half-close: the process reads its input to the end, and its output still comes back.
    if (stdin !== undefined) stream.end(stdin);
    await new Promise<void>((resolve, reject) => {
      const done = (e?: Error) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        stream.removeListener("end", onEnd);
        stream.removeListener("close", onEnd);
        stream.removeListener("error", onError);
        if (e) {
          stream.destroy();
          reject(e);
        } else resolve();
      };
      const onEnd = () => done();
      const onError = (e: Error) => done(new EngineError(`${what}: ${e.message}`));
      const onAbort = () => done(new EngineError(`${what}: aborted`, null, "ABORT_ERR"));
      const timer = setTimeout(() => done(new EngineError(`${what}: no answer within ${Math.round(timeoutMs / 1000)} s`)), timeoutMs);
      stream.on("end", onEnd);
      stream.on("close", onEnd);
      stream.on("error", onError);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
    // Output written just before the end is delivered on the next turn; the exit code can lag the stream's end.
    await new Promise((r) => setImmediate(r));
    let info = await this.call(what, () => exec.inspect({ abortSignal: signal } as object));
    for (let i = 0; i < 40 && info.Running; i++) {
      await new Promise((r) => setTimeout(r, 50));
      info = await this.call(what, () => exec.inspect({ abortSignal: signal } as object));
    }
    return {
      exitCode: typeof info.ExitCode === "number" ? info.ExitCode : -1,
      stdout: Buffer.concat(chunks.out).toString("utf8"),
      stderr: Buffer.concat(chunks.err).toString("utf8"),
    };
  }
}
