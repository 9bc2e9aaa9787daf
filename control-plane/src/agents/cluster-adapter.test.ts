import { createServer, type Server as HttpServer } from "node:http";
import pg from "pg";
import { Server as IoServer } from "socket.io";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { freshPostgresDatabase } from "../../../test/api/support/database.js";
import { usePostgresAdapter } from "./cluster-adapter.js";

const pgUrl = process.env.CAPSTAN_TEST_PG_URL;

/**
 * Two replicas' socket.io servers sharing one PostgreSQL database through the adapter. A
 * payload over NOTIFY's 8000 bytes travels through the attachments table: the other replica
 * reads it, the sender does not read its own back.
 */
describe.skipIf(!pgUrl)("cluster adapter on PostgreSQL", () => {
  const replicas: { http: HttpServer; io: IoServer; stop: () => Promise<void> }[] = [];
  let drop: () => Promise<void> = async () => {};
  const queries: { pool: pg.Pool; sql: string }[] = [];

  beforeAll(async () => {
    const db = await freshPostgresDatabase(pgUrl!);
    drop = db.drop;
    const original = pg.Pool.prototype.query;
    vi.spyOn(pg.Pool.prototype, "query").mockImplementation(function (this: pg.Pool, ...args: unknown[]) {
      const sql = typeof args[0] === "string" ? args[0] : ((args[0] as { text?: string })?.text ?? "");
      queries.push({ pool: this, sql });
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as never);
    for (let i = 0; i < 2; i++) {
      const http = createServer();
      const io = new IoServer(http);
      const stop = await usePostgresAdapter(io, db.url);
      replicas.push({ http, io, stop });
    }
  });

  afterAll(async () => {
    vi.restoreAllMocks();
    for (const r of replicas) {
      r.io.close();
      await r.stop();
    }
    await drop();
  });

  it("a large server-side emit reaches the other replica once, and its sender reads nothing back", async () => {
    const [a, b] = replicas as [(typeof replicas)[0], (typeof replicas)[0]];
    const big = "x".repeat(20_000);
    const heard = new Promise<string>((resolve) => b.io.of("/").on("capstan:test-big", (payload: string) => resolve(payload)));
    const heardByA = vi.fn();
    a.io.of("/").on("capstan:test-big", heardByA);
    // The LISTEN clients connect in the background: emit until B hears (bounded).
    const deadline = Date.now() + 10_000;
    let got: string | undefined;
    while (got === undefined && Date.now() < deadline) {
      a.io.of("/").serverSideEmit("capstan:test-big", big);
      got = await Promise.race([heard, new Promise<undefined>((r) => setTimeout(() => r(undefined), 200))]);
    }
    expect(got).toBe(big);
    const inserts = queries.filter((q) => q.sql.startsWith("INSERT INTO socket_io_attachments"));
    expect(inserts.length).toBeGreaterThan(0);
    const senderPool = inserts[0]!.pool;
    const reads = queries.filter((q) => q.sql.startsWith("SELECT payload FROM socket_io_attachments"));
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.filter((q) => q.pool === senderPool)).toEqual([]);
    expect(heardByA).not.toHaveBeenCalled();
  });
});
