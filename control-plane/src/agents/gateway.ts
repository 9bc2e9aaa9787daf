import type { IncomingMessage, Server as HttpServer } from "node:http";
import type { Server as IoServer, Namespace, Socket } from "socket.io";
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
  type JobEnvelope,
  type OutcomeAck,
  type ServerStatusEvent,
} from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import { paddedIn, toInt, type SqlReader } from "../db/reader.js";
import type { PlainWriter } from "../db/plain-writer.js";
import type { Logger } from "../lib/log.js";
import type { JobQueue } from "../jobs/queue.js";
import type { JobDispatcher } from "../jobs/dispatcher.js";
import { GroupWriter, Serial } from "../jobs/group-writer.js";
import { AGENT_TOKEN_PATTERN, hashAgentToken } from "../crypto/agent-token.js";
import { chunks } from "../db/chunks.js";
import { applyStatusReport } from "./resource-status.js";
import { BUSY, HandshakeAdmission, type AdmissionLimits } from "./admission.js";
import { KnownAgentTokens } from "./known-tokens.js";
import { FleetStream } from "./fleet-stream.js";
import type { FleetVisibility } from "./fleet-visibility.js";
import { markReachable, markUnreachable, type HelloWrite, type ServerStatusRow } from "./server-rows.js";
import { openGatewayDoor, type GatewayDoor } from "./door.js";
import { isUsableFacts, reprepareFailed } from "./server-facts.js";
import { ThrottledBatch } from "./throttled-batch.js";
import { ReplicaLease } from "./replica-lease.js";

export { PING_INTERVAL_MS, PING_TIMEOUT_MS } from "./door.js";
const ACK_TIMEOUT_MS = 5000;
const HEARTBEAT_MS = 10_000;
const STALE_AFTER_MS = 35_000;
/** The known agent tokens are read again this often (known-tokens.ts). */
const KNOWN_TOKENS_RELOAD_MS = 30_000;
/**
 * On PostgreSQL, during a burst of handshakes, one read of their tokens per this many ms. Each
 * statement costs the pg client about 0.6 ms of CPU whatever its size (bench/fleet): a fleet
 * reconnecting at 500 agents a second read in groups of 4 at 8 ms; at 20 ms, of 10.
 */
const LOOKUPS_EVERY_MS = 20;
/** Token lookups and hellos per database statement during a reconnect storm. */
const HANDSHAKES_PER_BATCH = 512;
/**
 * During a burst of hellos, one group is stored per this many ms (see hellos below): longer on
 * PostgreSQL, where a statement's fixed cost is higher (LOOKUPS_EVERY_MS) and its round trip
 * lets the event loop take only a few hellos per group otherwise.
 */
const HELLOS_EVERY_MS = { sqlite: 15, postgresql: 40 } as const;
/** The reads that follow hellos (open jobs, failed preparations) run at most this often. */
const AFTER_HELLOS_MS = 100;

interface AgentSocketData {
  serverId: number;
  teamId: number;
  uuid: string;
  name: string;
  agentVersion: string;
  /** Set once its hello is stored: jobs go only to greeted connections. */
  greeted: boolean;
}

export interface AgentGateway extends JobDispatcher {
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

export interface GatewayOptions {
  db: Db;
  /** The plain read path (db/reader.ts): handshakes' token checks read through it. */
  reader: SqlReader;
  /** The plain writer (db/plain-writer.ts): the grouped writes of hellos and disconnects. */
  writer: PlainWriter;
  dialect: "sqlite" | "postgresql";
  log: Logger;
  /** The source address of a handshake, by the HTTP layer's `trust proxy` rule (client-address.ts). */
  clientAddress: (req: IncomingMessage) => string;
  /** Who may see which resource's status on /fleet (fleet-visibility.ts). */
  visibility: FleetVisibility;
  /** Several replicas share one database (PostgreSQL and its socket.io cluster adapter). */
  clustered: boolean;
  /** Handshake limits (admission.ts); tests lower them. */
  admission?: Partial<AdmissionLimits>;
  /** The socket.io server already listening on `http` (door.ts); else one is made here. */
  door?: GatewayDoor;
}

/**
 * socket.io endpoint of agents (/agents, authenticated by per-server token) and of the fleet
 * stream for dashboards (/fleet, authenticated by API token, scoped to its team and to what
 * its user may see). The default namespace `/` serves nothing and refuses everyone.
 *
 * It is the queue's JobDispatcher: jobs go to the agents connected here.
 */
export async function attachGateway(http: HttpServer, jobs: JobQueue, opts: GatewayOptions): Promise<AgentGateway> {
  const { db, log } = opts;
  const door = opts.door ?? openGatewayDoor(http);
  const io: IoServer = door.io;
  const agents: Namespace = io.of(AGENTS_NAMESPACE);
  const admission = new HandshakeAdmission(opts.admission);
  const fleet = new FleetStream(io.of(FLEET_NAMESPACE), {
    db,
    log,
    admission,
    clientAddress: opts.clientAddress,
    visibility: opts.visibility,
    clustered: opts.clustered,
  });
  const known = new KnownAgentTokens(opts.reader);
  await known.start(KNOWN_TOKENS_RELOAD_MS, (err) => log.error({ err: { message: (err as Error)?.message } }, "reloading the known agent tokens failed"));
  const sweeper = setInterval(() => admission.sweep(), 60_000);
  sweeper.unref();

  const sockets = new Map<number, Socket>();
  const lease = new ReplicaLease(db);
  await lease.beat();
  // The heartbeat's and the disconnects' grouped writes of server rows run one at a time (two at
  // once could deadlock on PostgreSQL: group-writer.ts, Serial). Hellos write each server of a
  // group in id order, as the heartbeat does; a deadlock PostgreSQL still finds fails one
  // statement, whose hellos are then written one by one.
  const serverWrites = new Serial();
  const dataOf = (socket: Socket) => socket.data as AgentSocketData;

  const statusEvent = (s: ServerStatusRow): { teamId: number; event: ServerStatusEvent } => ({
    teamId: s.teamId,
    event: {
      uuid: s.uuid,
      name: s.name,
      status: s.status as ServerStatusEvent["status"],
      last_seen_at: s.lastSeenAt?.toISOString() ?? null,
      agent_version: s.agentVersion,
      at: new Date().toISOString(),
    },
  });
  const statusSelect = { id: true, uuid: true, name: true, teamId: true, status: true, lastSeenAt: true, agentVersion: true } as const;

  // ---------------------------------------------------------------- handshakes
  // Token checks of handshakes arriving together share one read (a restarted control plane
  // meets the whole fleet at once), through the plain read path (committed rows, a statement
  // prepared once per list size). On SQLite a read per event-loop turn (it costs a few tens of
  // microseconds); on PostgreSQL at most one per LOOKUPS_EVERY_MS during a burst, as each
  // statement costs the pg client and the database server CPU on top of its round trip. Groups
  // are read in turns of their own, so pings of connected agents keep being answered between.
  type ServerRef = { id: number; teamId: number; uuid: string; name: string };
  type Lookup = { hash: string; resolve: (s: ServerRef | null) => void; reject: (err: unknown) => void };
  const readServers = async (hashes: string[]): Promise<(ServerRef | null)[]> => {
    const { list, values } = paddedIn([...new Set(hashes)], "");
    const rows = await opts.reader.all<{ id: unknown; teamId: unknown; uuid: string; name: string; agentTokenHash: string }>(
      `SELECT "id", "teamId", "uuid", "name", "agentTokenHash" FROM "Server" WHERE "agentTokenHash" IN (${list})`,
      values,
    );
    const byHash = new Map(rows.map((r) => [r.agentTokenHash, { id: toInt(r.id), teamId: toInt(r.teamId), uuid: r.uuid, name: r.name }]));
    return hashes.map((h) => byHash.get(h) ?? null);
  };
  const lookupBatch = new ThrottledBatch<Lookup>(opts.dialect === "postgresql" ? LOOKUPS_EVERY_MS : 0, async (items) => {
    for (const [i, group] of chunks(items, HANDSHAKES_PER_BATCH).entries()) {
      if (i > 0) await new Promise((r) => setImmediate(r));
      try {
        const found = await readServers(group.map((g) => g.hash));
        group.forEach((g, k) => g.resolve(found[k]!));
      } catch (err) {
        for (const g of group) g.reject(err);
      }
    }
  });
  const lookup = (hash: string) => new Promise<ServerRef | null>((resolve, reject) => lookupBatch.add({ hash, resolve, reject }));

  const checkAgent = (socket: Socket, next: (err?: Error) => void) => {
    const address = opts.clientAddress(socket.request);
    const hs = AgentHandshake.safeParse(socket.handshake.auth);
    if (!hs.success) {
      admission.failed(address);
      return next(new Error("invalid handshake"));
    }
    if (hs.data.protocol_version !== PROTOCOL_VERSION) {
      return next(new Error(`unsupported protocol version ${hs.data.protocol_version}; this control plane speaks ${PROTOCOL_VERSION}`));
    }
    if (!AGENT_TOKEN_PATTERN.test(hs.data.token)) {
      admission.failed(address);
      return next(new Error("invalid agent token"));
    }
    const hash = hashAgentToken(hs.data.token);
    const ticket = admission.admit(address, known.has(hash) ? "known" : "other");
    if (!ticket.ok) return next(new Error(ticket.reason));
    lookup(hash).then(
      (server) => {
        ticket.release();
        if (!server) {
          known.forget(hash);
          admission.failed(address);
          return next(new Error("invalid agent token"));
        }
        known.add(hash);
        const data: AgentSocketData = { serverId: server.id, teamId: server.teamId, uuid: server.uuid, name: server.name, agentVersion: hs.data.agent_version, greeted: false };
        socket.data = data;
        next();
      },
      (err: unknown) => {
        ticket.release();
        log.error({ err: { message: (err as Error)?.message } }, "agent handshake failed");
        next(new Error(BUSY));
      },
    );
  };

  // ---------------------------------------------------------------- hellos
  // What follows hellos, gathered over many groups of hellos (throttled-batch.ts): the open jobs
  // of greeted agents are (re)delivered, and a server whose preparation failed while it had no
  // engine is prepared again now it has one. Each is one read per pass.
  const afterHellos = new ThrottledBatch<{ serverId: number; greetedAt: number; usable: boolean }>(
    AFTER_HELLOS_MS,
    async (items) => {
      const greeted = new Map<number, number>();
      for (const i of items) greeted.set(i.serverId, i.greetedAt);
      await jobs.redeliver(greeted).catch((err) => log.warn({ err: { message: (err as Error)?.message } }, "redelivering jobs after hellos failed; the pump retries"));
      const usable = [...new Set(items.filter((i) => i.usable).map((i) => i.serverId))];
      await reprepareFailed(db, jobs, usable, opts.reader).catch((err) => log.error({ err: { message: (err as Error)?.message } }, "preparing servers again failed"));
    },
    (err) => log.error({ err: { message: (err as Error)?.message } }, "work after hellos failed"),
  );

  // Hellos are stored in groups, one UPDATE per 190 (server-rows.ts), then acked: the first
  // hello after a quiet spell on the next turn of the event loop, and during a burst (a fleet
  // connecting or reconnecting) at most one group per HELLOS_EVERY_MS, with everything that
  // arrived meanwhile. Each statement has a fixed cost whatever its size (half a millisecond of
  // CPU through Prisma, less through the plain writer), and a group per event-loop turn meant
  // groups of one to three hellos.
  // What follows them is left to afterHellos.
  type Hello = { socket: Socket; write: HelloWrite; ok: boolean; ack?: (r: unknown) => void };
  const storeHellos = async (group: Hello[]): Promise<void> => {
    // In server id order: the heartbeat locks rows in the same order.
    const live = group.filter((h) => h.socket.connected && sockets.get(h.write.serverId) === h.socket).sort((a, b) => a.write.serverId - b.write.serverId);
    if (!live.length) return;
    const rows = await markReachable(opts.writer, opts.dialect, live.map((h) => h.write), lease.id);
    const greetedAt = Date.now();
    for (const h of live) {
      if (typeof h.ack === "function") h.ack({ ok: h.ok });
      dataOf(h.socket).greeted = true;
    }
    if (fleet.listened) fleet.publishServers(rows.map(statusEvent));
    for (const h of live) afterHellos.add({ serverId: h.write.serverId, greetedAt, usable: h.write.usable === true });
  };
  const hellos = new ThrottledBatch<Hello>(
    HELLOS_EVERY_MS[opts.dialect],
    async (batch) => {
      for (const [i, group] of chunks(batch, HANDSHAKES_PER_BATCH).entries()) {
        if (i > 0) await new Promise((r) => setImmediate(r)); // pings go on between groups
        try {
          await storeHellos(group);
        } catch (err) {
          // One bad hello (its server deleted meanwhile) or a deadlock PostgreSQL found: the
          // group's hellos are written one by one, so only a failing one fails.
          if (group.length === 1) throw err;
          for (const h of group) await storeHellos([h]).catch((one) => log.error({ err: { message: (one as Error)?.message }, server: h.write.serverId }, "storing an agent's hello failed"));
        }
      }
    },
    (err) => log.error({ err: { message: (err as Error)?.message } }, "storing an agent's hello failed"),
  );

  // Disconnects arriving together (a network blip drops many agents) share one statement.
  const disconnects = new GroupWriter<{ serverId: number; connection: string }, void>(
    async (batch) => {
      const rows = await serverWrites.run(() => markUnreachable(opts.writer, opts.dialect, batch));
      if (fleet.listened) fleet.publishServers(rows.map(statusEvent));
      return batch.map(() => undefined);
    },
    { maxItems: HANDSHAKES_PER_BATCH, startOnNextTurn: true },
  );

  agents.on("connection", (socket) => {
    const { serverId, agentVersion } = dataOf(socket);
    const previous = sockets.get(serverId);
    sockets.set(serverId, socket);
    previous?.disconnect(true); // one live connection per server: the newest wins
    log.info({ server: serverId, agentVersion }, "agent connected");

    socket.on(EV.hello, (raw: unknown, ack?: (r: unknown) => void) => {
      const hello = AgentHello.safeParse(raw);
      // is_usable follows what the agent reports (GET .../validate changes nothing).
      const write: HelloWrite = hello.success
        ? { serverId, facts: JSON.stringify(hello.data.facts), usable: isUsableFacts(hello.data.facts), agentVersion, connection: socket.id }
        : { serverId, facts: null, usable: null, agentVersion, connection: socket.id };
      hellos.add({ socket, write, ok: hello.success, ack });
    });

    socket.on(EV.facts, (raw: unknown) => {
      const report = AgentHello.safeParse(raw);
      if (!report.success) return;
      const usable = isUsableFacts(report.data.facts);
      db.server
        .update({ where: { id: serverId }, data: { facts: JSON.stringify(report.data.facts), isUsable: usable, lastSeenAt: new Date() } })
        .then(() => (usable && dataOf(socket).greeted ? reprepareFailed(db, jobs, [serverId], opts.reader) : 0))
        .catch((err) => log.error({ err: { message: (err as Error)?.message }, server: serverId }, "storing an agent's facts failed"));
    });

    // Reports of one agent are applied one after another, in the order they were sent.
    let statusChain: Promise<void> = Promise.resolve();
    socket.on(EV.resourceStatus, (raw: unknown) => {
      const report = ResourceStatusReport.safeParse(raw);
      if (!report.success) return;
      const { uuid } = dataOf(socket);
      statusChain = statusChain
        .then(async () => fleet.publishResources(await applyStatusReport(db, { id: serverId, uuid }, report.data)))
        .catch((err) => log.error({ err, server: serverId }, "storing resource statuses failed"));
    });

    socket.on(EV.jobProgress, (raw: unknown) => {
      const p = JobProgress.safeParse(raw);
      if (p.success) jobs.progress(serverId, p.data.id, p.data.attempt, p.data.lines).catch(() => {});
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

    socket.on("disconnect", (reason) => {
      if (sockets.get(serverId) !== socket) return; // replaced by a newer connection
      sockets.delete(serverId);
      log.info({ server: serverId, reason }, "agent disconnected");
      disconnects.add({ serverId, connection: socket.id }).catch(() => {});
    });
  });

  // Liveness across replicas (replica-lease.ts): each replica renews its lease, which vouches
  // for every server it holds; the servers of a replica whose lease lapsed (it died) are marked
  // unreachable by whichever replica looks first, as are servers this replica holds in the
  // database but no longer has a socket for (a disconnect whose write failed).
  const markGone = (where: Prisma.ServerWhereInput, lastSeenAt?: Date) =>
    serverWrites.run(() =>
      db.server.updateManyAndReturn({
        where: { ...where, status: "reachable" },
        data: { status: "unreachable", isUsable: false, agentConnection: null, gatewayReplica: null, ...(lastSeenAt ? { lastSeenAt } : {}) },
        select: statusSelect,
      }),
    );
  const publishGone = (rows: ServerStatusRow[]) => {
    if (rows.length && fleet.listened) fleet.publishServers(rows.map(statusEvent));
  };
  const heartbeat = setInterval(async () => {
    try {
      const now = new Date();
      await lease.beat(now);
      const cutoff = new Date(now.getTime() - STALE_AFTER_MS);
      for (const dead of await lease.lapsed(cutoff)) {
        // Seen last when its replica last vouched for it (the connectivity history's `at`).
        publishGone(await markGone({ gatewayReplica: dead.id }, dead.beatAt));
        await lease.forget(dead.id, cutoff);
      }
      // Rows reachable without a replica (written before leases, or by hand) keep the old rule.
      publishGone(await markGone({ gatewayReplica: null, lastSeenAt: { lt: cutoff } }));
      // Cheap check first: a count; the ids are read only when some row has no socket here.
      const held = await db.server.count({ where: { status: "reachable", gatewayReplica: lease.id } });
      if (held > sockets.size) {
        const rows = await db.server.findMany({ where: { status: "reachable", gatewayReplica: lease.id }, select: { id: true } });
        const orphans = rows.map((r) => r.id).filter((id) => !sockets.has(id));
        for (const ids of chunks(orphans)) publishGone(await markGone({ id: { in: ids }, gatewayReplica: lease.id }, now));
      }
    } catch (err) {
      log.error({ err }, "agent heartbeat failed");
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();

  // Everything is in place: the handshakes held while this control plane started go through.
  door.open({ agents: checkAgent, fleet: fleet.check });

  const ready = (serverId: number): Socket | null => {
    const socket = sockets.get(serverId);
    return socket && dataOf(socket).greeted ? socket : null;
  };

  return {
    io,
    connectedServerIds: () => [...sockets.keys()],
    isConnected: (id) => sockets.has(id),
    canDeliver: (serverId) => ready(serverId) !== null,
    deliverable: () => [...sockets].filter(([, socket]) => dataOf(socket).greeted).map(([id]) => id),
    async deliver(serverId: number, envelope: JobEnvelope) {
      const socket = ready(serverId);
      if (!socket) return null;
      try {
        const raw = await socket.timeout(ACK_TIMEOUT_MS).emitWithAck(EV.job, envelope);
        const ack = JobAck.safeParse(raw);
        return ack.success ? ack.data : { accepted: false, reason: "malformed ack" };
      } catch {
        return null;
      }
    },
    cancel(serverId, jobId) {
      sockets.get(serverId)?.emit(EV.jobCancel, { id: jobId });
    },
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
      io.of(FLEET_NAMESPACE).local.disconnectSockets(true);
    },
    async close() {
      clearInterval(heartbeat);
      clearInterval(sweeper);
      known.stop();
      fleet.close();
      agents.local.disconnectSockets(true);
      io.of(FLEET_NAMESPACE).local.disconnectSockets(true);
      await new Promise<void>((resolve) => io.close(() => resolve()));
      await lookupBatch.close();
      await hellos.close();
      await disconnects.flushed();
      await afterHellos.close();
    },
  };
}
