import pg from "pg";
import { PostgresAdapter, type PostgresAdapterOptions } from "@socket.io/postgres-adapter";
import { PubSubClient, type ExtendedClusterMessage } from "@socket.io/postgres-adapter/dist/util.js";
import type { Namespace, Server as IoServer } from "socket.io";

const TABLE = "socket_io_attachments";

const OPTIONS: Required<PostgresAdapterOptions> = {
  channelPrefix: "socket.io",
  tableName: TABLE,
  payloadThreshold: 8000,
  cleanupInterval: 30_000,
  errorHandler: () => {},
};

/**
 * The package's createAdapter, with one difference: a message whose payload went through the
 * attachments table arrives as a header that names its sender but not its namespace, and the
 * package's self check looks the sender up by namespace, so every replica read its own large
 * broadcasts back from the table (one SELECT of the whole payload each) only to drop them.
 * Here a message is from this replica when any of its namespaces' adapters sent it.
 */
function adapterFactory(pool: pg.Pool): (nsp: Namespace) => PostgresAdapter {
  const adapters = new Map<string, PostgresAdapter>();
  const uidOf = (a: PostgresAdapter) => (a as unknown as { uid: string }).uid;
  const fromSelf = (msg: ExtendedClusterMessage) => {
    for (const a of adapters.values()) if (uidOf(a) === msg.uid) return true;
    return false;
  };
  const client = new PubSubClient(pool, OPTIONS, fromSelf, (msg) => adapters.get(msg.nsp)?.onMessage(msg));
  // socket.io calls this with `new`: a plain function that returns the adapter object.
  return function (nsp: Namespace) {
    const adapter = new PostgresAdapter(nsp, {}, client);
    adapters.set(nsp.name, adapter);
    client.addNamespace(nsp.name);
    const close = adapter.close.bind(adapter);
    adapter.close = () => {
      adapters.delete(nsp.name);
      if (adapters.size === 0) client.close();
      return close();
    };
    return adapter;
  };
}

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
  io.adapter(adapterFactory(pool) as unknown as Parameters<IoServer["adapter"]>[0]);
  return () => pool.end();
}
