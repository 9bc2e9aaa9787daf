import type { Db } from "../db/client.js";
import { toDate, toInt } from "../db/reader.js";

/** What a hello changes on its server's row. */
export interface HelloWrite {
  serverId: number;
  /** HostFacts as JSON; null keeps the stored facts (a hello whose facts did not parse). */
  facts: string | null;
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

/** 4 bound values per hello, within SQLite's 999 per statement. */
const HELLOS_PER_STATEMENT = 200;

/**
 * Marks the servers of these hellos reachable, in one UPDATE per 200 hellos (a fleet
 * reconnecting after a restart says hello 10,000 times within seconds), and answers the rows
 * as stored. Written per dialect over a VALUES list; `updatedAt` is set here as Prisma would.
 */
export async function markReachable(db: Db, dialect: "sqlite" | "postgresql", hellos: HelloWrite[]): Promise<ServerStatusRow[]> {
  const out: ServerStatusRow[] = [];
  for (let i = 0; i < hellos.length; i += HELLOS_PER_STATEMENT) {
    const part = hellos.slice(i, i + HELLOS_PER_STATEMENT);
    const params: unknown[] = [];
    for (const h of part) params.push(h.serverId, h.facts, h.agentVersion, h.connection);
    const now = new Date();
    params.push(now, now); // lastSeenAt, updatedAt
    const rows = await db.$queryRawUnsafe<Record<string, unknown>[]>(markReachableSql(dialect, part.length), ...params);
    for (const r of rows) {
      out.push({
        id: toInt(r.id),
        uuid: String(r.uuid),
        name: String(r.name),
        teamId: toInt(r.teamId),
        status: String(r.status),
        lastSeenAt: r.lastSeenAt === null || r.lastSeenAt === undefined ? null : toDate(r.lastSeenAt),
        agentVersion: r.agentVersion === null || r.agentVersion === undefined ? null : String(r.agentVersion),
      });
    }
  }
  return out;
}

function markReachableSql(dialect: "sqlite" | "postgresql", n: number): string {
  if (dialect === "sqlite") {
    const values = Array.from({ length: n }, () => "(?, ?, ?, ?)").join(", ");
    return `WITH "v"("id", "facts", "agentVersion", "agentConnection") AS (VALUES ${values})
      UPDATE "Server" SET "status" = 'reachable', "lastSeenAt" = ?, "updatedAt" = ?,
        "agentVersion" = "v"."agentVersion", "agentConnection" = "v"."agentConnection", "facts" = COALESCE("v"."facts", "Server"."facts")
      FROM "v" WHERE "Server"."id" = "v"."id"
      RETURNING "id", "uuid", "name", "teamId", "status", "lastSeenAt", "agentVersion"`;
  }
  const values = Array.from({ length: n }, (_, i) => {
    const p = i * 4;
    return `($${p + 1}::int, $${p + 2}::text, $${p + 3}::text, $${p + 4}::text)`;
  }).join(", ");
  return `UPDATE "Server" AS "s" SET "status" = 'reachable', "lastSeenAt" = $${n * 4 + 1}::timestamp(3), "updatedAt" = $${n * 4 + 2}::timestamp(3),
      "agentVersion" = "v"."agentVersion", "agentConnection" = "v"."agentConnection", "facts" = COALESCE("v"."facts", "s"."facts")
    FROM (VALUES ${values}) AS "v"("id", "facts", "agentVersion", "agentConnection")
    WHERE "s"."id" = "v"."id"
    RETURNING "s"."id", "s"."uuid", "s"."name", "s"."teamId", "s"."status", "s"."lastSeenAt", "s"."agentVersion"`;
}
