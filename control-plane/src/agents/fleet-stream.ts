import type { IncomingMessage } from "node:http";
import type { Namespace, Socket } from "socket.io";
import { EV, TeamRole, TokenScope, storedFeatures, type ResourceStatusEvent, type ServerStatusEvent } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { Caller } from "../domain/caller.js";
import type { Logger } from "../lib/log.js";
import { chunks } from "../db/chunks.js";
import { hashApiToken, looksLikeApiToken } from "../crypto/api-token.js";
import type { HandshakeAdmission } from "./admission.js";
import type { FleetVisibility, ResourcePlace } from "./fleet-visibility.js";

/** A resource status change and where the resource lives (only `event` is sent). */
export interface ResourceChange extends ResourcePlace {
  teamId: number;
  event: ResourceStatusEvent;
}

/** What one flush sends to one team's dashboards. */
interface TeamBatch {
  teamId: number;
  servers: ServerStatusEvent[];
  resources: ResourceChange[];
}

/** Replica to replica (socket.io's server-side emit through the cluster adapter). */
const BATCH_EVENT = "capstan:fleet-batch";

/** Events of this long go out together. */
const BATCH_WINDOW_MS = 50;
/**
 * During a burst (a flush less than this long ago) the window widens to this: a reconnecting
 * fleet's statuses go out in a few large batches (each one NOTIFY, and one token check per
 * dashboard) instead of twenty a second.
 */
const BURST_WINDOW_MS = 250;

/** An idle dashboard's token is looked at again this often (a busy one at every batch). */
export const FLEET_RECHECK_MS = 30_000;

/** What a token check reads: the token, and its team's paid features (a Caller carries them). */
const TOKEN_SELECT = { id: true, teamId: true, userId: true, scopes: true, revokedAt: true, expiresAt: true, team: { select: { features: true } } } as const;

interface FleetSocketData {
  tokenId: number;
  teamId: number;
}

export interface FleetStreamDeps {
  db: Db;
  log: Logger;
  admission: HandshakeAdmission;
  clientAddress: (req: IncomingMessage) => string;
  visibility: FleetVisibility;
  /** Replicas share batches (PostgreSQL's cluster adapter); SQLite means one replica. */
  clustered: boolean;
}

/**
 * The dashboards' stream (/fleet): `server:status` of every server of the token's team, and
 * `resource:status` of the resources the token's user may see (fleet-visibility.ts).
 *
 * Events are sent in batches per team (those of 50 ms together), and before each batch every receiving socket's token
 * is read again (revoked, expired, member removed, `read` scope lost: the socket is dropped)
 * and, for members, their grants. A batch is built on the replica where the agent is
 * connected and handed to every replica (cluster adapter), each of which checks and delivers
 * to its own dashboards.
 */
export class FleetStream {
  private readonly byTeam = new Map<number, Set<Socket>>();
  /** Batches waiting for this turn of the event loop to end, by team. */
  private pending = new Map<number, TeamBatch>();
  private flushScheduled = false;
  private lastFlushAt = 0;
  /** Deliveries per team run one after another: events keep their order. */
  private readonly chains = new Map<number, Promise<void>>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly ns: Namespace,
    private readonly deps: FleetStreamDeps,
  ) {
    ns.on("connection", (socket) => this.connected(socket));
    ns.on(BATCH_EVENT, (batches: TeamBatch[]) => {
      for (const b of batches) this.deliver(b);
    });
    this.timer = setInterval(() => {
      for (const teamId of this.byTeam.keys()) this.deliver({ teamId, servers: [], resources: [] });
    }, FLEET_RECHECK_MS);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** The handshake check of /fleet (the gateway's door runs it). */
  readonly check = (socket: Socket, next: (err?: Error) => void): void => void this.authenticate(socket, next);

  /** Whether anyone may hear: a dashboard here, or other replicas (which may have some). */
  get listened(): boolean {
    return this.deps.clustered || this.byTeam.size > 0;
  }

  /** Connectivity changes of servers: every dashboard of the server's team hears of them. */
  publishServers(events: { teamId: number; event: ServerStatusEvent }[]): void {
    if (!this.listened) return;
    for (const e of events) this.batch(e.teamId).servers.push(e.event);
    this.scheduleFlush();
  }

  /** Status changes of resources: each dashboard hears of those its token's user may see. */
  publishResources(changes: ResourceChange[]): void {
    if (!this.listened) return;
    for (const c of changes) this.batch(c.teamId).resources.push(c);
    this.scheduleFlush();
  }

  private batch(teamId: number): TeamBatch {
    let b = this.pending.get(teamId);
    if (!b) {
      b = { teamId, servers: [], resources: [] };
      this.pending.set(teamId, b);
    }
    return b;
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // A short window gathers a reconnecting fleet's events into few batches: one token check
    // per batch and team, and (with several replicas) one NOTIFY per batch.
    const burst = Date.now() - this.lastFlushAt < BURST_WINDOW_MS;
    setTimeout(() => {
      this.flushScheduled = false;
      this.lastFlushAt = Date.now();
      const batches = [...this.pending.values()];
      this.pending = new Map();
      if (!batches.length) return;
      if (this.deps.clustered) {
        try {
          this.ns.serverSideEmit(BATCH_EVENT, batches);
        } catch (err) {
          this.deps.log.error({ err: { message: (err as Error)?.message } }, "handing fleet events to the other replicas failed");
        }
      }
      for (const b of batches) this.deliver(b);
    }, burst ? BURST_WINDOW_MS : BATCH_WINDOW_MS).unref();
  }

  private deliver(batch: TeamBatch): void {
    if (!this.byTeam.get(batch.teamId)?.size) return;
    const previous = this.chains.get(batch.teamId) ?? Promise.resolve();
    const next = previous
      .then(() => this.deliverNow(batch))
      .catch((err) => this.deps.log.error({ err: { message: (err as Error)?.message }, team: batch.teamId }, "delivering fleet events failed"));
    this.chains.set(batch.teamId, next);
    void next.then(() => {
      if (this.chains.get(batch.teamId) === next) this.chains.delete(batch.teamId);
    });
  }

  private async deliverNow(batch: TeamBatch): Promise<void> {
    const sockets = [...(this.byTeam.get(batch.teamId) ?? [])];
    if (!sockets.length) return;
    const callers = await this.callers(sockets.map((s) => (s.data as FleetSocketData).tokenId));
    const places = batch.resources.map((r) => ({ environmentId: r.environmentId, projectId: r.projectId }));
    for (const socket of sockets) {
      const { tokenId, teamId } = socket.data as FleetSocketData;
      const caller = callers.get(tokenId);
      if (!caller || caller.teamId !== teamId) {
        socket.disconnect(true);
        continue;
      }
      if (!socket.connected) continue;
      for (const event of batch.servers) socket.emit(EV.serverStatus, event);
      if (!places.length) continue;
      const visible = await this.deps.visibility(caller, places);
      batch.resources.forEach((r, i) => visible[i] && socket.emit(EV.resourceStatus, r.event));
    }
  }

  /** The tokens as they stand now; a token that no longer grants `read` is left out. */
  private async callers(tokenIds: number[]): Promise<Map<number, Caller>> {
    const out = new Map<number, Caller>();
    for (const ids of chunks([...new Set(tokenIds)])) {
      const tokens = await this.deps.db.apiToken.findMany({
        where: { id: { in: ids } },
        select: TOKEN_SELECT,
      });
      const members = new Map<string, string>();
      const users = tokens.filter((t) => t.userId !== null);
      if (users.length) {
        const rows = await this.deps.db.membership.findMany({
          where: { OR: users.map((t) => ({ teamId: t.teamId, userId: t.userId! })) },
          select: { teamId: true, userId: true, role: true },
        });
        for (const m of rows) members.set(`${m.teamId}:${m.userId}`, m.role);
      }
      for (const t of tokens) {
        const caller = callerOf(t, t.userId === null ? null : (members.get(`${t.teamId}:${t.userId}`) ?? null));
        if (caller) out.set(t.id, caller);
      }
    }
    return out;
  }

  private async authenticate(socket: Socket, next: (err?: Error) => void): Promise<void> {
    const address = this.deps.clientAddress(socket.request);
    const ticket = this.deps.admission.admit(address, "other");
    if (!ticket.ok) return next(new Error(ticket.reason));
    try {
      const token = (socket.handshake.auth as { token?: unknown } | undefined)?.token;
      if (typeof token !== "string" || !looksLikeApiToken(token)) {
        this.deps.admission.failed(address);
        return next(new Error("Unauthenticated."));
      }
      const row = await this.deps.db.apiToken.findUnique({
        where: { secretHash: hashApiToken(token) },
        select: TOKEN_SELECT,
      });
      const member = row?.userId != null ? await this.deps.db.membership.findUnique({ where: { teamId_userId: { teamId: row.teamId, userId: row.userId } }, select: { role: true } }) : null;
      const caller = row ? callerOf(row, member?.role ?? null, { needRead: false }) : null;
      if (!row || !caller) {
        this.deps.admission.failed(address);
        return next(new Error("Unauthenticated."));
      }
      if (!caller.scopes.has("read")) return next(new Error("Invalid ability provided."));
      const data: FleetSocketData = { tokenId: caller.tokenId, teamId: caller.teamId };
      socket.data = data;
      next();
    } catch (err) {
      this.deps.log.error({ err: { message: (err as Error)?.message } }, "fleet handshake failed");
      next(new Error("busy, retry later"));
    } finally {
      ticket.release();
    }
  }

  private connected(socket: Socket): void {
    const { teamId } = socket.data as FleetSocketData;
    let set = this.byTeam.get(teamId);
    if (!set) {
      set = new Set();
      this.byTeam.set(teamId, set);
    }
    set.add(socket);
    socket.once("disconnect", () => {
      const s = this.byTeam.get(teamId);
      s?.delete(socket);
      if (s && !s.size) this.byTeam.delete(teamId);
    });
  }
}

/**
 * A token as the REST API would take it now (http/auth.ts): not revoked, not expired, and a
 * user token only while its user is a member of the token's team (with the `read` scope
 * unless told otherwise); scopes and role parsed with the shared enums, as there (a name this
 * version does not know grants nothing). null: it grants nothing.
 */
function callerOf(
  t: { id: number; teamId: number; userId: number | null; scopes: string; revokedAt: Date | null; expiresAt: Date | null; team: { features: string } },
  role: string | null,
  opts: { needRead: boolean } = { needRead: true },
): Caller | null {
  if (t.revokedAt || (t.expiresAt && t.expiresAt.getTime() <= Date.now())) return null;
  let teamRole: TeamRole = "admin";
  if (t.userId !== null) {
    const parsed = TeamRole.safeParse(role);
    if (!parsed.success) return null;
    teamRole = parsed.data;
  }
  const scopes = new Set(t.scopes.split(",").flatMap((s) => {
    const scope = TokenScope.safeParse(s);
    return scope.success ? [scope.data] : [];
  }));
  if (opts.needRead && !scopes.has("read")) return null;
  return { tokenId: t.id, teamId: t.teamId, userId: t.userId, role: teamRole, scopes, features: new Set(storedFeatures(t.team.features)) };
}
