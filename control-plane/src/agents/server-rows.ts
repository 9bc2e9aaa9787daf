import type { PlainWriter } from "../db/plain-writer.js";
import { toDate, toInt } from "../db/reader.js";
import { param, valuesList, type Dialect } from "../jobs/sql.js";

/** What a hello changes on its server's row. */
export interface HelloWrite {
  serverId: number;
  /** HostFacts as JSON; null keeps the stored facts (a hello whose facts did not parse). */
  facts: string | null;
  /** Whether those facts make the server usable; null keeps the stored flag. */
  usable: boolean | null;
  agentVersion: string;
  /** The socket id of the connection that said hello (a stale disconnect must not undo it). */
  connection: string;
}

/** A server row as the fleet stream reports it. */
export interface ServerStatusRow {
  id: number;
  uuid: string;
  name: string;
  teamId: number;
  status: string;
  lastSeenAt: Date | null;
  agentVersion: string | null;
}

/** Rows per statement, within SQLite's 999 bound values: 5 per hello, 2 per disconnect. */
const HELLOS_PER_STATEMENT = 190;
const DISCONNECTS_PER_STATEMENT = 400;

const RETURNING = ["id", "uuid", "name", "teamId", "status", "lastSeenAt", "agentVersion"];

/**
 * Marks the servers of these hellos reachable and held by this replica (replica-lease.ts), in
 * one UPDATE per 190 hellos (a fleet reconnecting after a restart says hello 10,000 times within
 * seconds), and answers the rows
 * as stored. Written per dialect over a VALUES list (jobs/sql.ts) through the plain writer
 * (db/plain-writer.ts); `updatedAt` is set here as Prisma would.
 */
export async function markReachable(writer: PlainWriter, dialect: Dialect, hellos: HelloWrite[], replica: string): Promise<ServerStatusRow[]> {
  const out: ServerStatusRow[] = [];
  for (let i = 0; i < hellos.length; i += HELLOS_PER_STATEMENT) {
    const part = hellos.slice(i, i + HELLOS_PER_STATEMENT);
    const params: unknown[] = [];
    for (const h of part) params.push(h.serverId, h.facts, h.usable, h.agentVersion, h.connection);
    const now = new Date();
    params.push(now, now, replica); // lastSeenAt, updatedAt, gatewayReplica
    out.push(...rowsOf(await writer.query<Record<string, unknown>>(markReachableSql(dialect, part.length), params)));
  }
  return out;
}

/**
 * Marks the servers of these closed connections unreachable (and not usable), each only while
 * that connection is still the server's current one: a newer connection of the same agent,
 * here or on another replica, is left alone.
 */
export async function markUnreachable(writer: PlainWriter, dialect: Dialect, closed: { serverId: number; connection: string }[]): Promise<ServerStatusRow[]> {
  const out: ServerStatusRow[] = [];
  for (let i = 0; i < closed.length; i += DISCONNECTS_PER_STATEMENT) {
    const part = closed.slice(i, i + DISCONNECTS_PER_STATEMENT);
    const params: unknown[] = [];
    for (const c of part) params.push(c.serverId, c.connection);
    const now = new Date();
    params.push(now, now); // lastSeenAt, updatedAt
    out.push(...rowsOf(await writer.query<Record<string, unknown>>(markUnreachableSql(dialect, part.length), params)));
  }
  return out;
}

function rowsOf(rows: Record<string, unknown>[]): ServerStatusRow[] {
  return rows.map((r) => ({
    id: toInt(r.id),
    uuid: String(r.uuid),
    name: String(r.name),
    teamId: toInt(r.teamId),
    status: String(r.status),
    lastSeenAt: r.lastSeenAt === null || r.lastSeenAt === undefined ? null : toDate(r.lastSeenAt),
    agentVersion: r.agentVersion === null || r.agentVersion === undefined ? null : String(r.agentVersion),
  }));
}

function markReachableSql(dialect: Dialect, n: number): string {
  const values = valuesList(dialect, n, ["int", "text", "boolean", "text", "text"]);
  const seen = param(dialect, n * 5 + 1, "timestamp(3)");
  const updated = param(dialect, n * 5 + 2, "timestamp(3)");
  const replica = param(dialect, n * 5 + 3, "text");
  if (dialect === "sqlite") {
    return `WITH "v"("id", "facts", "usable", "agentVersion", "agentConnection") AS (VALUES ${values})
      UPDATE "Server" SET "status" = 'reachable', "lastSeenAt" = ${seen}, "updatedAt" = ${updated}, "gatewayReplica" = ${replica},
        "agentVersion" = "v"."agentVersion", "agentConnection" = "v"."agentConnection", "facts" = COALESCE("v"."facts", "Server"."facts"), "isUsable" = COALESCE("v"."usable", "Server"."isUsable")
      FROM "v" WHERE "Server"."id" = "v"."id"
      RETURNING ${RETURNING.map((c) => `"${c}"`).join(", ")}`;
  }
  return `UPDATE "Server" AS "s" SET "status" = 'reachable', "lastSeenAt" = ${seen}, "updatedAt" = ${updated}, "gatewayReplica" = ${replica},
      "agentVersion" = "v"."agentVersion", "agentConnection" = "v"."agentConnection", "facts" = COALESCE("v"."facts", "s"."facts"), "isUsable" = COALESCE("v"."usable", "s"."isUsable")
    FROM (VALUES ${values}) AS "v"("id", "facts", "usable", "agentVersion", "agentConnection")
    WHERE "s"."id" = "v"."id"
    RETURNING ${RETURNING.map((c) => `"s"."${c}"`).join(", ")}`;
}

function markUnreachableSql(dialect: Dialect, n: number): string {
  const values = valuesList(dialect, n, ["int", "text"]);
  const seen = param(dialect, n * 2 + 1, "timestamp(3)");
  const updated = param(dialect, n * 2 + 2, "timestamp(3)");
  const set = `"status" = 'unreachable', "isUsable" = false, "agentConnection" = NULL, "gatewayReplica" = NULL, "lastSeenAt" = ${seen}, "updatedAt" = ${updated}`;
  if (dialect === "sqlite") {
    return `WITH "v"("id", "agentConnection") AS (VALUES ${values})
      UPDATE "Server" SET ${set}
      FROM "v" WHERE "Server"."id" = "v"."id" AND "Server"."agentConnection" = "v"."agentConnection"
      RETURNING ${RETURNING.map((c) => `"${c}"`).join(", ")}`;
  }
  return `UPDATE "Server" AS "s" SET ${set}
    FROM (VALUES ${values}) AS "v"("id", "agentConnection")
    WHERE "s"."id" = "v"."id" AND "s"."agentConnection" = "v"."agentConnection"
    RETURNING ${RETURNING.map((c) => `"s"."${c}"`).join(", ")}`;
}
