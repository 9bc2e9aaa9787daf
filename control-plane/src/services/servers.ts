import { replicaBeats, seenAt } from "../domain/server-seen.js";
import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { ProxyIsolationPhase, engineUsability, type HostFacts, type ProxyIsolationState } from "@capstan/shared";
import { classifyAddress, isRefusedAddress } from "@capstan/shared/net";
import type { Db, Prisma } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { NotFound, Invalid, Conflict, Unavailable, UpstreamFailed } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import { generateAgentToken, hashAgentToken } from "../crypto/agent-token.js";
import type { JobQueue } from "../jobs/queue.js";
import type { SqlReader } from "../db/reader.js";
import { serverDomains, serverResources, storedResourceCounts, storedResources, type LiveView, type ServerDomainView, type ServerResourceView } from "./server-resources.js";

/** The network every server gets; its destination is the default `destination_uuid`. */
export const DEFAULT_NETWORK = "capstan";
/** A new server's prepare job waits this long for its agent to show up. */
export const PREPARE_TIMEOUT_MS = 24 * 3600_000;
/** How long the resource and domain lists wait for the engine's view before answering from the records alone. */
export const LIVE_VIEW_TIMEOUT_MS = 10_000;

const withDetail = {
  privateKey: { select: { uuid: true } },
  destinations: { orderBy: { id: "asc" } },
} satisfies Prisma.ServerInclude;
export type ServerWithDetail = Prisma.ServerGetPayload<{ include: typeof withDetail }>;

export interface AgentLink {
  standDown(serverId: number, reason: string): void;
  disconnect(serverId: number): void;
}

type Window = { skip?: number; take?: number };

/** The server's reverse proxy as GET /servers/{uuid} shows it: the agent's last report, and the isolation phase. */
export interface ServerProxyView {
  kind: "caddy";
  name: string;
  image: string | null;
  version: string | null;
  status: string;
  routes: number | null;
  /** Why the agent's last sync left something out (bad `proxy.*` labels among them); absent until an agent that reports it synced. */
  warnings?: string[];
  isolation: ProxyIsolationState;
  reportedAt: Date | null;
}

/** What the server detail needs of the instance's settings. */
export interface ServerSettings {
  /** The proxy container's name (config.proxy.name): shown until the agent reports its proxy. */
  proxyName: string;
  /** Whether proxy isolation is in effect on this instance (config.network.proxyIsolation). */
  proxyIsolation: boolean;
}

/** A host to install the agent on over SSH (agents/ssh-install.ts does it). */
export interface SshTarget {
  host: string;
  port: number;
  username: string;
  privateKey: string;
  /** "SHA256:..." recorded at the first connection; null accepts and reports the key seen */
  knownHostKey: string | null;
}

export interface InstallResult {
  exitCode: number;
  output: string;
  hostKey: string;
}

/** How agents get onto hosts: the join command users run, or an install over SSH. */
export interface AgentSetup {
  joinCommand(agentToken: string): string;
  install(target: SshTarget, agentToken: string): Promise<InstallResult>;
  openKey(sealed: string): string;
}

export interface CreateServerInput {
  name: string;
  description?: string | undefined;
  ip: string;
  port: number;
  user: string;
  private_key_uuid: string;
  is_build_server: boolean;
}

export interface ServerServiceOptions {
  /** PLATFORM_ALLOW_PRIVATE_ENDPOINTS: servers may also be at loopback, link-local or metadata addresses. */
  allowPrivateEndpoints?: boolean;
  /** Name resolution for install-agent (tests replace it). */
  lookup?: (host: string) => Promise<{ address: string }[]>;
}

const defaultLookup = (host: string) => dnsLookup(host, { all: true, verbatim: true });

function refusedAddress(host: string, address: string): string {
  const what = isIP(address) === 0 ? `${host} names this machine (loopback);` : host === address ? `${address} is` : `${host} resolves to ${address},`;
  return (
    `${what}${isIP(address) === 0 ? "" : ` a ${classifyAddress(address)} address:`} servers cannot be at loopback, link-local, unspecified, multicast, reserved or cloud metadata addresses ` +
    "(the instance setting PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows them); private network addresses are fine."
  );
}

/** Servers of a team (spec 4.3): records, agent credentials and live checks through the agent. */
/** One period of a server's agent connectivity: a state from `since` until the next one began (null: now). */
export interface ConnectivityView {
  state: string;
  since: Date;
  until: Date | null;
}

export class ServerService {
  private agents: AgentLink | null = null;
  /** How long the resource and domain lists wait for the engine's view (tests shorten it). */
  liveViewWaitMs = LIVE_VIEW_TIMEOUT_MS;

  constructor(
    private readonly db: Db,
    private readonly jobs: JobQueue,
    private readonly setup: AgentSetup,
    private readonly reader: SqlReader,
    private readonly settings: ServerSettings,
    private readonly opts: ServerServiceOptions = {},
  ) {}

  bindAgents(link: AgentLink): void {
    this.agents = link;
  }

  /**
   * Whether the server's agent is connected to any replica: `status` is kept by the replica
   * holding the connection (and reset when a replica dies), so this holds cluster-wide.
   */
  static agentConnected(server: { status: string }): boolean {
    return server.status === "reachable";
  }

  count(scope: TeamScope) {
    return this.db.server.count({ where: scope.inTeam });
  }

  /** A page of the team's servers, each with how many resources on it the caller may see (one statement for the page). */
  async list(scope: TeamScope, window: Window) {
    const servers = await this.withSeen(await this.db.server.findMany({ where: scope.inTeam, orderBy: { id: "asc" }, ...window }));
    const counts = await storedResourceCounts(this.reader, scope, servers.map((s) => s.id));
    return servers.map((s) => ({ ...s, resourceCount: counts.get(s.id) ?? 0 }));
  }

  async get(scope: TeamScope, uuid: string): Promise<ServerWithDetail> {
    const [server] = await this.withSeen([await scope.server(uuid, withDetail)]);
    return server!;
  }

  /**
   * The servers with lastSeenAt as the API shows it (domain/server-seen.ts): for a reachable
   * server, the last beat of the replica holding its agent when that is later than its row's.
   */
  private async withSeen<S extends { status: string; lastSeenAt: Date | null; gatewayReplica: string | null }>(servers: S[]): Promise<S[]> {
    if (!servers.some((s) => s.status === "reachable" && s.gatewayReplica)) return servers;
    const beats = await replicaBeats(this.db);
    return servers.map((s) => ({ ...s, lastSeenAt: seenAt(s, beats) }));
  }

  /**
   * GET /servers/{uuid}/connectivity (dashboard, issue 22): the newest `limit` transitions of
   * the server's agent connectivity, each with when the next one began (null for the current
   * state). The rows are written by a database trigger on the server's status (migration
   * 20261127035553_server_connectivity), the newest 200 per server kept.
   */
  async connectivity(scope: TeamScope, uuid: string, limit: number): Promise<ConnectivityView[]> {
    const server = await scope.server(uuid);
    const rows = await this.db.serverConnectivity.findMany({ where: { serverId: server.id }, orderBy: { id: "desc" }, take: limit, select: { state: true, at: true } });
    return rows.map((r, i) => ({ state: r.state, since: r.at, until: i === 0 ? null : rows[i - 1]!.at }));
  }

  /** GET /servers/{uuid}: the server with its proxy (the spec's "proxy configuration"). */
  async detail(scope: TeamScope, uuid: string): Promise<{ server: ServerWithDetail; proxy: ServerProxyView }> {
    const server = await this.get(scope, uuid);
    return { server, proxy: this.proxyOf(server) };
  }

  /**
   * The proxy as the agent last reported it in its facts (kind, name, image, Caddy's version,
   * container state, routes loaded), with the server's proxy isolation phase. Without a report
   * (no agent yet, an agent from before issue 15, an engine that did not answer) the status is
   * unknown.
   */
  private proxyOf(server: { facts: string | null; proxyIsolation: string; lastSeenAt: Date | null }): ServerProxyView {
    const phase = ProxyIsolationPhase.safeParse(server.proxyIsolation);
    const isolation = { enabled: this.settings.proxyIsolation, phase: phase.success ? phase.data : "none" };
    const reported = ServerService.facts(server)?.proxy;
    if (!reported) return { kind: "caddy", name: this.settings.proxyName, image: null, version: null, status: "unknown", routes: null, isolation, reportedAt: null };
    return { ...reported, isolation, reportedAt: server.lastSeenAt };
  }

  async create(scope: TeamScope, input: CreateServerInput): Promise<{ server: ServerWithDetail; agentToken: string; joinCommand: string }> {
    scope.requireTeamAdmin("manage servers");
    this.checkAddress(input.ip);
    const key = await scope.privateKey(input.private_key_uuid);
    const agentToken = generateAgentToken();
    const serverId = await this.db.$transaction(async (tx) => {
      const server = await tx.server.create({
        data: {
          uuid: newUuid(),
          teamId: scope.teamId,
          name: input.name,
          description: input.description ?? "",
          ip: input.ip,
          port: input.port,
          user: input.user,
          privateKeyId: key.id,
          isBuildServer: input.is_build_server,
          agentTokenHash: hashAgentToken(agentToken),
          destinations: { create: { uuid: newUuid(), name: "default", networkName: DEFAULT_NETWORK } },
        },
      });
      // Runs when the agent first connects: the server's platform network(s).
      await this.jobs.enqueue(tx, server.id, "server.prepare", { networks: [DEFAULT_NETWORK] }, PREPARE_TIMEOUT_MS);
      return server.id;
    });
    const server = await this.db.server.findUniqueOrThrow({ where: { id: serverId }, include: withDetail });
    return { server, agentToken, joinCommand: this.setup.joinCommand(agentToken) };
  }

  async update(
    scope: TeamScope,
    uuid: string,
    input: Partial<Omit<CreateServerInput, "port" | "user" | "is_build_server">> & { port?: number | undefined; user?: string | undefined; is_build_server?: boolean | undefined },
  ) {
    scope.requireTeamAdmin("manage servers");
    const server = await this.get(scope, uuid);
    const data: Prisma.ServerUncheckedUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.description !== undefined) data.description = input.description;
    if (input.ip !== undefined) {
      this.checkAddress(input.ip);
      data.ip = input.ip;
    }
    if (input.port !== undefined) data.port = input.port;
    if (input.user !== undefined) data.user = input.user;
    if (input.is_build_server !== undefined) data.isBuildServer = input.is_build_server;
    if (input.private_key_uuid !== undefined) data.privateKeyId = (await scope.privateKey(input.private_key_uuid)).id;
    await this.db.server.update({ where: { id: server.id }, data });
    return this.detail(scope, uuid);
  }

  /** Management only: the host keeps running what it runs; the agent is told to stop. */
  async remove(scope: TeamScope, uuid: string): Promise<void> {
    scope.requireTeamAdmin("manage servers");
    const server = await this.get(scope, uuid);
    // Applications keep their server (and its destinations): removing it would orphan them.
    const apps = await this.db.application.count({ where: { serverId: server.id } });
    if (apps > 0) throw new Conflict(`Server ${server.name} has ${apps} application(s); delete them or their environments first.`);
    const databases = await this.db.standaloneDatabase.count({ where: { serverId: server.id } });
    if (databases > 0) throw new Conflict(`Server ${server.name} has ${databases} database(s); delete them or their environments first.`);
    // services (issue 17)
    const services = await this.db.service.count({ where: { serverId: server.id } });
    if (services > 0) throw new Conflict(`Server ${server.name} has ${services} service(s); delete them or their environments first.`);
    await this.db.server.delete({ where: { id: server.id } });
    this.agents?.standDown(server.id, "server removed from management");
  }

  /** New agent token; the old one stops working at once and its connection is dropped. */
  async rotateAgentToken(scope: TeamScope, uuid: string): Promise<{ agentToken: string; joinCommand: string }> {
    scope.requireTeamAdmin("manage servers");
    const server = await this.get(scope, uuid);
    const agentToken = generateAgentToken();
    await this.db.server.update({ where: { id: server.id }, data: { agentTokenHash: hashAgentToken(agentToken) } });
    this.agents?.disconnect(server.id);
    return { agentToken, joinCommand: this.setup.joinCommand(agentToken) };
  }

  /**
   * Installs or replaces the agent on the host over SSH with the server's key and a fresh
   * agent token. Bounded in time; the answer carries the installer's exit code and output.
   */
  async installAgent(scope: TeamScope, uuid: string): Promise<{ exitCode: number; output: string }> {
    scope.requireTeamAdmin("manage servers");
    const server = await this.get(scope, uuid);
    const key = await this.db.privateKey.findUniqueOrThrow({ where: { id: server.privateKeyId } });
    // Checked again right before connecting: the record may predate the rule, and a name may
    // resolve elsewhere now than when it was saved.
    const host = await this.sshAddress(server.ip);
    // The new token takes effect only once the installer succeeded: a failed attempt leaves
    // the running agent alone. The new agent retries (with backoff) until then.
    const agentToken = generateAgentToken();
    let result: InstallResult;
    try {
      result = await this.setup.install(
        { host, port: server.port, username: server.user, privateKey: this.setup.openKey(key.privateKeyEncrypted), knownHostKey: server.sshHostKey },
        agentToken,
      );
    } catch (err) {
      throw new UpstreamFailed((err as Error).message);
    }
    if (result.exitCode === 0) {
      await this.db.server.update({
        where: { id: server.id },
        data: { agentTokenHash: hashAgentToken(agentToken), sshHostKey: server.sshHostKey ?? result.hostKey },
      });
      this.agents?.disconnect(server.id);
    }
    return { exitCode: result.exitCode, output: result.output };
  }

  /**
   * Engine running and compose available, checked now by the agent. A GET changes nothing:
   * is_usable follows the facts the agent reports (on connect, every minute, and at once when
   * its engine comes or goes: agents/gateway.ts), and the reason of an unusable server is in its
   * detail (settings.unusable_reason) as well as in this answer. A server that is not usable is
   * not a fault of the request: Unavailable (503) with the reason, never a field error a client
   * would take for bad input (docs/decisions.md).
   */
  async validate(scope: TeamScope, uuid: string): Promise<{ dockerVersion: string }> {
    const server = await this.get(scope, uuid);
    const notUsable = (reason: string): never => {
      throw new Unavailable(`Server ${server.name} is not usable: ${reason}`);
    };
    if (!ServerService.agentConnected(server)) notUsable("its agent is not connected.");
    const job = await this.jobs.run(server.id, "server.validate", {});
    if (job.status !== "succeeded") return notUsable(job.error);
    if (!job.result.compose_version) notUsable("Docker Compose is not available.");
    return { dockerVersion: job.result.docker_version };
  }

  /**
   * Whether the server can run what the platform sends it, and if not why (shown as
   * settings.unusable_reason): its agent's connection, then the agent's last facts.
   */
  static usability(server: { status: string; isUsable: boolean; facts: string | null }): { usable: boolean; reason: string | null } {
    if (!ServerService.agentConnected(server)) return { usable: false, reason: "The agent is not connected." };
    const { usable, reason } = engineUsability(ServerService.facts(server));
    // The stored flag is what the agent last reported (facts written before it existed say nothing).
    return server.isUsable && usable ? { usable: true, reason: null } : { usable: false, reason: reason ?? "The agent has not reported a usable engine yet." };
  }

  /**
   * A server address users may give (POST and PATCH): not a loopback, link-local, unspecified,
   * multicast, reserved or cloud metadata address, nor localhost by name, unless the instance
   * allows them (PLATFORM_ALLOW_PRIVATE_ENDPOINTS). Private networks are normal for servers.
   * Names are judged on every address they resolve to when install-agent connects.
   */
  private checkAddress(ip: string): void {
    if (this.opts.allowPrivateEndpoints) return;
    const host = ip.replace(/^\[|\]$/g, "").replace(/\.+$/, "").toLowerCase();
    if (isIP(host) !== 0 ? isRefusedAddress(host) : host === "localhost" || host.endsWith(".localhost")) {
      throw new Invalid({ ip: [refusedAddress(host, host)] });
    }
  }

  /**
   * The address install-agent connects to, checked right before: a literal as it is; a name
   * resolved now, every address it resolves to checked, and the connection made to the checked
   * address (a second lookup could answer differently).
   */
  private async sshAddress(ip: string): Promise<string> {
    if (this.opts.allowPrivateEndpoints) return ip;
    this.checkAddress(ip);
    if (isIP(ip) !== 0) return ip;
    let addresses: { address: string }[];
    try {
      addresses = await (this.opts.lookup ?? defaultLookup)(ip);
    } catch (err) {
      throw new UpstreamFailed(`The server's address ${ip} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}).`);
    }
    const bad = addresses.find((a) => isRefusedAddress(a.address));
    if (bad) throw new Invalid({ ip: [refusedAddress(ip, bad.address)] });
    if (!addresses[0]) throw new UpstreamFailed(`The server's address ${ip} does not resolve.`);
    return addresses[0].address;
  }

  /**
   * The engine's view of the server now (the containers the platform manages), when its agent is
   * connected and answers within LIVE_VIEW_TIMEOUT_MS; otherwise no view, and when the agent was
   * last in touch.
   */
  private async liveView(server: { id: number; status: string; lastSeenAt: Date | null }): Promise<LiveView> {
    const away: LiveView = { live: false, lastSeenAt: server.lastSeenAt };
    if (!ServerService.agentConnected(server)) return away;
    const job = await this.jobs.run(server.id, "containers.list", {}, this.liveViewWaitMs);
    return job.status === "succeeded" ? { live: true, at: new Date(), containers: job.result.containers } : away;
  }

  /** GET /servers/{uuid}/resources: every resource on the server the caller may see (services/server-resources.ts). */
  async resources(scope: TeamScope, uuid: string): Promise<ServerResourceView[]> {
    const server = await this.get(scope, uuid);
    const rows = await storedResources(this.reader, scope, server.id);
    return serverResources(rows, rows.length ? await this.liveView(server) : { live: false, lastSeenAt: server.lastSeenAt });
  }

  /** GET /servers/{uuid}/domains: the configured domains of the resources the caller may see, routed or not now. */
  async domains(scope: TeamScope, uuid: string): Promise<ServerDomainView[]> {
    const server = await this.get(scope, uuid);
    const rows = (await storedResources(this.reader, scope, server.id)).filter((r) => r.fqdn);
    return serverDomains(rows, rows.length ? await this.liveView(server) : { live: false, lastSeenAt: server.lastSeenAt });
  }

  static facts(server: { facts: string | null }): HostFacts | null {
    if (!server.facts) return null;
    try {
      return JSON.parse(server.facts) as HostFacts;
    } catch {
      return null;
    }
  }
}
