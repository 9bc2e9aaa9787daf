import type { Server as HttpServer } from "node:http";
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { Server as IoServer, type Namespace, type Socket } from "socket.io";
import {
  AGENTS_NAMESPACE,
  AgentHandshake,
  AgentHello,
  EV,
  FLEET_NAMESPACE,
  JobAck,
  JobOutcome,
  JobProgress,
  PROTOCOL_VERSION,
  ResourceStatusReport,
  type OutcomeAck,
  type ServerStatusEvent,
} from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { Logger } from "../lib/log.js";
import type { JobQueue } from "../jobs/queue.js";
import { AGENT_TOKEN_PATTERN, hashAgentToken } from "../crypto/agent-token.js";
import { chunks } from "../db/chunks.js";
import { hashApiToken, looksLikeApiToken } from "../crypto/api-token.js";
import { applyStatusReport } from "./resource-status.js";
import { factsData, reprepareIfFailed } from "./server-facts.js";

/** Ping every 2.5 s, give up after 5 s more: a vanished agent is noticed within ~7.5 s. */
export const PING_INTERVAL_MS = 2500;
export const PING_TIMEOUT_MS = 5000;
const ACK_TIMEOUT_MS = 5000;
const HEARTBEAT_MS = 10_000;
const MAX_HANDSHAKES_IN_FLIGHT = 100;
const STALE_AFTER_MS = 35_000;

interface AgentSocketData {
  serverId: number;
  teamId: number;
  uuid: string;
  name: string;
  agentVersion: string;
}

export interface AgentGateway {
  io: IoServer;
  connectedServerIds(): number[];
  isConnected(serverId: number): boolean;
  /** Tells the agent of a server to stop for good (server deleted) and drops it. */
  standDown(serverId: number, reason: string): void;
  /** Drops the agent's connection (token rotated). */
  disconnect(serverId: number): void;
  /** Drops every agent and dashboard connection of this replica (shutdown: agents reconnect elsewhere). */
  disconnectAll(): void;
  close(): Promise<void>;
}

/**
 * socket.io endpoint of agents (/agents, authenticated by per-server token) and of the fleet
 * stream for dashboards (/fleet, authenticated by API token, scoped to its team).
 */
export function attachGateway(http: HttpServer, db: Db, jobs: JobQueue, log: Logger): AgentGateway {
  const io = new IoServer(http, {
    pingInterval: PING_INTERVAL_MS,
    pingTimeout: PING_TIMEOUT_MS,
    maxHttpBufferSize: 4 * 1024 * 1024,
    serveClient: false,
    cors: { origin: false },
  });
  const agents: Namespace = io.of(AGENTS_NAMESPACE);
  const fleet: Namespace = io.of(FLEET_NAMESPACE);
  const sockets = new Map<number, Socket>();
  // Connections whose agent said hello: jobs go only to these, so the hello's redelivery is
  // the first delivery of a connection and the pump cannot race it with a duplicate.
  const greeted = new WeakSet<Socket>();

  type StatusRow = { uuid: string; name: string; teamId: number; status: string; lastSeenAt: Date | null; agentVersion: string | null };
  const publish = async (serverId: number, row?: StatusRow) => {
    const s = row ?? (await db.server.findUnique({ where: { id: serverId } }));
    if (!s) return;
    const event: ServerStatusEvent = {
      uuid: s.uuid,
      name: s.name,
      status: s.status as ServerStatusEvent["status"],
      last_seen_at: s.lastSeenAt?.toISOString() ?? null,
      agent_version: s.agentVersion,
      at: new Date().toISOString(),
    };
    fleet.to(`team:${s.teamId}`).emit(EV.serverStatus, event);
  };

  // A restarted control plane meets the whole fleet at once. Handshakes beyond this many in
  // flight are turned away (the agent retries with backoff and jitter), and each yields to
  // the event loop first, so pings of connected agents keep being answered.
  let handshakesInFlight = 0;
  agents.use(async (socket, next) => {
    if (handshakesInFlight >= MAX_HANDSHAKES_IN_FLIGHT) return next(new Error("busy, retry later"));
    handshakesInFlight++;
    try {
      await yieldToEventLoop();
      await authenticate(socket, next);
    } finally {
      handshakesInFlight--;
    }
  });

  const authenticate = async (socket: Socket, next: (err?: Error) => void) => {
    const hs = AgentHandshake.safeParse(socket.handshake.auth);
    if (!hs.success) return next(new Error("invalid handshake"));
    if (hs.data.protocol_version !== PROTOCOL_VERSION) {
      return next(new Error(`unsupported protocol version ${hs.data.protocol_version}; this control plane speaks ${PROTOCOL_VERSION}`));
    }
    if (!AGENT_TOKEN_PATTERN.test(hs.data.token)) return next(new Error("invalid agent token"));
    const server = await db.server.findUnique({ where: { agentTokenHash: hashAgentToken(hs.data.token) } });
    if (!server) return next(new Error("invalid agent token"));
    const data: AgentSocketData = {
      serverId: server.id,
      teamId: server.teamId,
      uuid: server.uuid,
      name: server.name,
      agentVersion: hs.data.agent_version,
    };
    socket.data = data;
    next();
  };

  agents.on("connection", (socket) => {
    const { serverId, agentVersion, uuid: serverUuid } = socket.data as AgentSocketData;
    const previous = sockets.get(serverId);
    sockets.set(serverId, socket);
    previous?.disconnect(true); // one live connection per server: the newest wins
    log.info({ server: serverId, agentVersion }, "agent connected");

    socket.on(EV.hello, async (raw: unknown, ack?: (r: unknown) => void) => {
      await yieldToEventLoop();
      const hello = AgentHello.safeParse(raw);
      const row = await db.server.update({
        where: { id: serverId },
        data: {
          status: "reachable",
          lastSeenAt: new Date(),
          agentVersion,
          agentConnection: socket.id,
          // is_usable follows what the agent reports (not GET .../validate, which changes nothing).
          ...(hello.success ? factsData(hello.data.facts) : {}),
        },
      });
      if (typeof ack === "function") ack({ ok: hello.success });
      await publish(serverId, row);
      const greetedAt = Date.now();
      greeted.add(socket);
      await jobs.kick(serverId, { redeliverSince: greetedAt });
      if (hello.success) await reprepareIfFailed(db, jobs, serverId, hello.data.facts).catch((err) => log.error({ err, server: serverId }, "preparing the server again failed"));
    });

    socket.on(EV.facts, async (raw: unknown) => {
      const report = AgentHello.safeParse(raw);
      if (!report.success) return;
      await db.server.update({ where: { id: serverId }, data: { ...factsData(report.data.facts), lastSeenAt: new Date() } }).catch(() => {});
      if (greeted.has(socket)) await reprepareIfFailed(db, jobs, serverId, report.data.facts).catch((err) => log.error({ err, server: serverId }, "preparing the server again failed"));
    });

    // Reports of one agent are applied one after another, in the order they were sent.
    let statusChain: Promise<void> = Promise.resolve();
    socket.on(EV.resourceStatus, (raw: unknown) => {
      const report = ResourceStatusReport.safeParse(raw);
      if (!report.success) return;
      statusChain = statusChain
        .then(async () => {
          const changes = await applyStatusReport(db, { id: serverId, uuid: serverUuid }, report.data);
          for (const c of changes) fleet.to(`team:${c.teamId}`).emit(EV.resourceStatus, c.event);
        })
        .catch((err) => log.error({ err, server: serverId }, "storing resource statuses failed"));
    });

    socket.on(EV.jobProgress, async (raw: unknown) => {
      const p = JobProgress.safeParse(raw);
      if (p.success) await jobs.progress(serverId, p.data.id, p.data.attempt, p.data.lines).catch(() => {});
    });

    socket.on(EV.jobOutcome, async (raw: unknown, ack?: (r: unknown) => void) => {
      const o = JobOutcome.safeParse(raw);
      try {
        const stored = o.success ? await jobs.applyOutcome(serverId, o.data) : false;
        const reply: OutcomeAck = { stored };
        if (typeof ack === "function") ack(reply);
      } catch (err) {
        log.error({ err, server: serverId }, "storing a job outcome failed");
      }
    });

    socket.on("disconnect", async (reason) => {
      if (sockets.get(serverId) !== socket) return; // replaced by a newer connection
      sockets.delete(serverId);
      log.info({ server: serverId, reason }, "agent disconnected");
      await db.server
        .updateMany({
          where: { id: serverId, agentConnection: socket.id },
          data: { status: "unreachable", isUsable: false, lastSeenAt: new Date(), agentConnection: null },
        })
        .catch(() => {});
      await publish(serverId).catch(() => {});
    });
  });

  fleet.use(async (socket, next) => {
    const token = (socket.handshake.auth as { token?: unknown })?.token;
    if (typeof token !== "string" || !looksLikeApiToken(token)) return next(new Error("Unauthenticated."));
    const row = await db.apiToken.findUnique({ where: { secretHash: hashApiToken(token) } });
    if (!row || row.revokedAt || (row.expiresAt && row.expiresAt <= new Date())) return next(new Error("Unauthenticated."));
    if (!row.scopes.split(",").includes("read")) return next(new Error("Invalid ability provided."));
    socket.data = { teamId: row.teamId };
    next();
  });
  fleet.on("connection", async (socket) => {
    const { teamId } = socket.data as { teamId: number };
    await socket.join(`team:${teamId}`);
  });

  // Liveness across replicas: each replica vouches for its own agents; a server nobody
  // vouched for recently (its replica died) is marked unreachable by whichever replica looks.
  const heartbeat = setInterval(async () => {
    try {
      const now = new Date();
      for (const ids of chunks([...sockets.keys()])) {
        await db.server.updateMany({ where: { id: { in: ids } }, data: { lastSeenAt: now } });
      }
      // Local servers were just stamped, so they cannot match; the check below is a guard.
      const stale = await db.server.findMany({
        where: { status: "reachable", lastSeenAt: { lt: new Date(now.getTime() - STALE_AFTER_MS) } },
        select: { id: true },
      });
      for (const s of stale) {
        if (sockets.has(s.id)) continue;
        await db.server.updateMany({ where: { id: s.id, status: "reachable" }, data: { status: "unreachable", isUsable: false, agentConnection: null } });
        await publish(s.id);
      }
    } catch (err) {
      log.error({ err }, "agent heartbeat failed");
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();

  jobs.bindTransport(
    async (serverId, envelope) => {
      const socket = sockets.get(serverId);
      if (!socket || !greeted.has(socket)) return null;
      try {
        const raw = await socket.timeout(ACK_TIMEOUT_MS).emitWithAck(EV.job, envelope);
        const ack = JobAck.safeParse(raw);
        return ack.success ? ack.data : { accepted: false, reason: "malformed ack" };
      } catch {
        return null;
      }
    },
    () => [...sockets].filter(([, socket]) => greeted.has(socket)).map(([id]) => id),
  );
  jobs.cancelOnAgent = (serverId, jobId) => {
    sockets.get(serverId)?.emit(EV.jobCancel, { id: jobId });
  };

  return {
    io,
    connectedServerIds: () => [...sockets.keys()],
    isConnected: (id) => sockets.has(id),
    standDown(serverId, reason) {
      const socket = sockets.get(serverId);
      if (!socket) return;
      socket.emit(EV.standDown, { reason });
      setTimeout(() => socket.disconnect(true), 1000).unref();
    },
    disconnect(serverId) {
      sockets.get(serverId)?.disconnect(true);
    },
    // `.local`: with the cluster adapter a plain disconnectSockets() is broadcast to every
    // replica, and a replica shutting down would drop the agents connected to the others.
    disconnectAll() {
      agents.local.disconnectSockets(true);
      fleet.local.disconnectSockets(true);
    },
    async close() {
      clearInterval(heartbeat);
      agents.local.disconnectSockets(true);
      fleet.local.disconnectSockets(true);
      await new Promise<void>((resolve) => io.close(() => resolve()));
    },
  };
}
