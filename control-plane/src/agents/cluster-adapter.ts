import pg from "pg";
import { createAdapter } from "@socket.io/postgres-adapter";
import type { Server as IoServer } from "socket.io";

const TABLE = "socket_io_attachments";

/**
 * With PostgreSQL, control-plane replicas share socket.io broadcasts through LISTEN/NOTIFY
 * (large payloads go through a table), so a dashboard on any replica hears about agents
 * connected to any other. SQLite means a single replica: nothing to share.
 */
export async function usePostgresAdapter(io: IoServer, url: string): Promise<() => Promise<void>> {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  // A connection the database ends (a restart, an administrator, a dropped database) emits
  // "error", on the pool when idle and on the client the adapter holds for LISTEN: without a
  // listener that would end the process. The adapter reconnects its LISTEN client by itself.
  pool.on("error", () => {});
  pool.on("connect", (client) => {
    client.on("error", () => {});
    // The adapter forgets a LISTEN client the database ended without giving it back to the
    // pool, and pool.end() would then wait for it forever when the control plane stops.
    client.on("end", () => {
      try {
        (client as unknown as { release?: (err?: Error) => void }).release?.(new Error("connection ended"));
      } catch {
        // it was back in the pool already
      }
    });
  });
  await pool.query(`CREATE TABLE IF NOT EXISTS ${TABLE} (
    id bigserial UNIQUE, created_at timestamptz DEFAULT NOW(), payload bytea)`);
  io.adapter(createAdapter(pool, { tableName: TABLE }));
  return () => pool.end();
}
