import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseConfig } from "../config.js";
import { openDatabase, TRANSACTION_LIMITS, type Database } from "./client.js";
import { lostRace } from "./errors.js";
import { migrate } from "./migrate.js";
import { ConnectionGate } from "./sqlite-serial.js";

/**
 * The embedded database has one better-sqlite3 connection. These tests pin down that an
 * interactive transaction on it is isolated from the rest of the process: plain queries made
 * while it is open neither see its writes nor get rolled back with it.
 */

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("SQLite interactive transactions", () => {
  let dir: string;
  let database: Database;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "capstan-sqlite-tx-"));
    const config: DatabaseConfig = { kind: "sqlite", file: join(dir, "capstan.db") };
    await migrate(config);
    database = await openDatabase(config);
  });

  afterAll(async () => {
    await database?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps a write made outside a transaction when the transaction rolls back", async () => {
    const db = database.prisma;
    const outside = await db.team.create({ data: { name: "outside-before" } });
    const txWrote = deferred();
    const release = deferred();

    const tx = db
      .$transaction(async (t) => {
        await t.team.create({ data: { name: "inside-rolled-back" } });
        txWrote.resolve();
        await release.promise;
        throw new Error("business rollback");
      })
      .then(
        () => "committed",
        (err: Error) => err.message,
      );

    await txWrote.promise;
    let settled = false;
    // Write B and a read outside the transaction, issued while it is open.
    const write = db.team.update({ where: { id: outside.id }, data: { name: "outside-after" } }).then((r) => {
      settled = true;
      return r;
    });
    const read = db.team.findMany({ where: { name: "inside-rolled-back" } });
    // Give them every chance to run on the shared connection before the rollback.
    await new Promise((r) => setTimeout(r, 50));
    release.resolve();

    expect(await tx).toBe("business rollback");
    expect((await write).name).toBe("outside-after");
    expect(settled).toBe(true);
    // The read outside must not have seen the transaction's uncommitted row.
    expect(await read).toEqual([]);
    // After the rollback: B survived, A is gone.
    expect((await db.team.findUniqueOrThrow({ where: { id: outside.id } })).name).toBe("outside-after");
    expect(await db.team.count({ where: { name: "inside-rolled-back" } })).toBe(0);
  });

  it("makes plain queries wait for an open transaction instead of joining it", async () => {
    const db = database.prisma;
    const txWrote = deferred();
    const release = deferred();
    const order: string[] = [];

    const tx = db.$transaction(async (t) => {
      await t.team.create({ data: { name: "committed-inside" } });
      txWrote.resolve();
      await release.promise;
      order.push("commit");
    });
    await txWrote.promise;
    const read = db.team.count({ where: { name: "committed-inside" } }).then((n) => {
      order.push("read");
      return n;
    });
    await new Promise((r) => setTimeout(r, 30));
    const whileOpen = [...order];
    release.resolve();
    await tx;
    expect(whileOpen).toEqual([]);
    // It ran after the commit, so it sees the committed row (read committed, as on PostgreSQL).
    expect(await read).toBe(1);
    expect(order).toEqual(["commit", "read"]);
  });

  it("lets the plain client be used inside a transaction callback without deadlock", async () => {
    const db = database.prisma;
    // Nesting the plain client in a callback is a mistake on PostgreSQL too (another
    // connection), but it must not hang the embedded database: it runs on the transaction.
    const n = await db.$transaction(
      async (t) => {
        await t.team.create({ data: { name: "nested-plain" } });
        return db.team.count({ where: { name: "nested-plain" } });
      },
      { timeout: 3_000 },
    );
    expect(n).toBe(1);
  });

  it("does not let work started in a finished transaction's callback slip into the next one", async () => {
    const db = database.prisma;
    const late = deferred();
    let lateWrite: Promise<unknown> = Promise.resolve();
    await db.$transaction(async (t) => {
      await t.team.create({ data: { name: "first-tx" } });
      // Fire-and-forget work that outlives the callback (it inherits its async context).
      lateWrite = late.promise.then(() => db.team.create({ data: { name: "late-plain" } }));
    });

    const secondWrote = deferred();
    const release = deferred();
    const second = db
      .$transaction(async (t) => {
        await t.team.create({ data: { name: "second-tx" } });
        secondWrote.resolve();
        await release.promise;
        throw new Error("second rolls back");
      })
      .catch((err: Error) => err.message);
    await secondWrote.promise;
    late.resolve();
    await new Promise((r) => setTimeout(r, 30));
    release.resolve();

    expect(await second).toBe("second rolls back");
    await lateWrite;
    expect(await db.team.count({ where: { name: "late-plain" } })).toBe(1);
    expect(await db.team.count({ where: { name: "second-tx" } })).toBe(0);
  });

  it("serialises concurrent transactions and plain writes without losing any", async () => {
    const db = database.prisma;
    const team = await db.team.create({ data: { name: "counter", description: "0" } });
    const bump = async (): Promise<void> => {
      await db.$transaction(async (t) => {
        const row = await t.team.findUniqueOrThrow({ where: { id: team.id } });
        await new Promise((r) => setImmediate(r));
        await t.team.update({ where: { id: team.id }, data: { description: String(Number(row.description) + 1) } });
      });
    };
    const plain: Promise<unknown>[] = [];
    const txs: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      txs.push(bump());
      plain.push(db.team.create({ data: { name: `plain-${i}` } }));
    }
    await Promise.all([...txs, ...plain]);
    expect((await db.team.findUniqueOrThrow({ where: { id: team.id } })).description).toBe("20");
    expect(await db.team.count({ where: { name: { startsWith: "plain-" } } })).toBe(20);
  });

  it("rejects a transaction that cannot start in maxWait and still serves later queries", async () => {
    const db = database.prisma;
    const release = deferred();
    const holding = deferred();
    const first = db.$transaction(
      async () => {
        holding.resolve();
        await release.promise;
      },
      { timeout: 5_000 },
    );
    await holding.promise;
    const starved = (await db.$transaction(async () => 1, { maxWait: 50 }).catch((err: Error) => err)) as Error;
    expect(starved.message).toMatch(/Unable to start a transaction in the given time/);
    // A request to retry, not a fault: http/errors.ts answers it 503 with Retry-After.
    expect(lostRace(starved)).toBe("overloaded");
    release.resolve();
    await first;
    // The late-acquired, discarded transaction must have released the connection.
    expect(await db.team.count({ where: { name: "nobody" } })).toBe(0);
    expect(await db.$transaction(async (t) => t.team.count())).toBeGreaterThan(0);
  });

  it("a transaction that runs past its limit fails as 'overloaded' (a request to retry, not a fault)", async () => {
    const db = database.prisma;
    const expired = await db
      .$transaction(
        async (tx) => {
          await new Promise((r) => setTimeout(r, 300));
          return tx.team.count();
        },
        { timeout: 100 },
      )
      .catch((err: unknown) => err);
    // http/errors.ts answers it 503 with Retry-After (http/errors.test.ts).
    expect(lostRace(expired), String(expired)).toBe("overloaded");
    // The client's own limits are the generous ones, not Prisma's 2 s / 5 s.
    expect(TRANSACTION_LIMITS.timeout).toBeGreaterThanOrEqual(30_000);
  });

  it("refuses at once a transaction started through the plain client inside a callback", async () => {
    const db = database.prisma;
    const started = Date.now();
    const outcome = await db
      .$transaction(async () => db.$transaction(async (t) => t.team.count()))
      .then(
        () => "started",
        (err: Error) => err.message,
      );
    expect(outcome).toMatch(/cannot be started through the plain client inside a \$transaction callback/);
    // Not the 2 s maxWait of waiting for itself.
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it("keeps nested transactions of the callback's client (savepoints) working", async () => {
    const db = database.prisma;
    await db.$transaction(async (t) => {
      await t.team.create({ data: { name: "savepoint-outer" } });
      await t
        .$transaction(async (inner) => {
          await inner.team.create({ data: { name: "savepoint-inner" } });
          throw new Error("inner rolls back");
        })
        .catch(() => {});
    });
    expect(await db.team.count({ where: { name: "savepoint-outer" } })).toBe(1);
    expect(await db.team.count({ where: { name: "savepoint-inner" } })).toBe(0);
  });

  it("isolates batch transactions the same way", async () => {
    const db = database.prisma;
    const holding = deferred();
    const release = deferred();
    const first = db.$transaction(async (t) => {
      await t.team.create({ data: { name: "batch-blocker" } });
      holding.resolve();
      await release.promise;
    });
    await holding.promise;
    const batch = db.$transaction([db.team.create({ data: { name: "batch-a" } }), db.team.count({ where: { name: "batch-blocker" } })]);
    await new Promise((r) => setTimeout(r, 30));
    release.resolve();
    await first;
    // The batch waited for the first transaction to commit.
    const [, blockers] = await batch;
    expect(blockers).toBe(1);
    expect(await db.team.count({ where: { name: "batch-a" } })).toBe(1);
  });

  it("the plain writer waits for an open transaction, survives its rollback and writes values as Prisma does", async () => {
    const db = database.prisma;
    const team = await db.team.create({ data: { name: "writer-before" } });
    const txWrote = deferred();
    const release = deferred();
    const tx = db
      .$transaction(async (t) => {
        await t.team.update({ where: { id: team.id }, data: { name: "writer-rolled-back" } });
        txWrote.resolve();
        await release.promise;
        throw new Error("business rollback");
      })
      .catch((err: Error) => err.message);
    await txWrote.promise;
    const at = new Date("2026-01-02T03:04:05.678Z");
    let written = false;
    const write = database.writer
      .query<{ id: unknown; name: unknown }>(`UPDATE "Team" SET "name" = ?, "updatedAt" = ? WHERE "id" = ? RETURNING "id", "name"`, ["writer-after", at, team.id])
      .then((rows) => ((written = true), rows));
    await new Promise((r) => setTimeout(r, 20));
    expect(written).toBe(false); // it would have joined the transaction
    release.resolve();
    expect(await tx).toBe("business rollback");
    expect(await write).toEqual([{ id: team.id, name: "writer-after" }]); // an integer as a number
    const read = await db.team.findUniqueOrThrow({ where: { id: team.id } });
    expect(read.name).toBe("writer-after");
    expect(read.updatedAt.toISOString()).toBe(at.toISOString()); // a Date read back by Prisma
    expect(await database.writer.execute(`UPDATE "Team" SET "name" = ? WHERE "id" = ?`, ["writer-again", -1])).toBe(0);
  });
});

describe("ConnectionGate", () => {
  it("lets a transaction in only when the plain queries in flight are done", async () => {
    const gate = new ConnectionGate();
    expect(gate.tryShared()).toBe(true);
    let granted = false;
    const lease = gate.exclusive().then((l) => {
      granted = true;
      return l;
    });
    await Promise.resolve();
    expect(granted).toBe(false);
    // A plain query arriving after the waiting transaction queues behind it (no starvation).
    expect(gate.tryShared()).toBe(false);
    const order: string[] = [];
    const later = gate.shared().then(() => order.push("plain"));
    gate.releaseShared();
    const l = await lease;
    order.push("tx");
    expect(gate.holder).toBe(l);
    await Promise.resolve();
    expect(order).toEqual(["tx"]);
    l.release();
    l.release(); // idempotent: must not release someone else's hold
    await later;
    expect(order).toEqual(["tx", "plain"]);
    expect(gate.holder).toBe(null);
    gate.releaseShared();
    expect(gate.tryShared()).toBe(true);
    gate.releaseShared();
  });

  it("grants consecutive plain waiters together and transactions one at a time", async () => {
    const gate = new ConnectionGate();
    const first = await gate.exclusive();
    const events: string[] = [];
    const a = gate.shared().then(() => events.push("a"));
    const b = gate.shared().then(() => events.push("b"));
    const second = gate.exclusive().then((l) => {
      events.push("tx2");
      return l;
    });
    first.release();
    await Promise.all([a, b]);
    expect(events).toEqual(["a", "b"]);
    gate.releaseShared();
    gate.releaseShared();
    const l2 = await second;
    expect(events).toEqual(["a", "b", "tx2"]);
    l2.release();
    expect(gate.holder).toBe(null);
  });
});
