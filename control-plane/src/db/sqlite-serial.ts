import { AsyncLocalStorage } from "node:async_hooks";
import type { PrismaBetterSqlite3 } from "@prisma/adapter-better-sqlite3";
import type Sqlite from "better-sqlite3";

/**
 * Isolation for the embedded database.
 *
 * `@prisma/adapter-better-sqlite3` runs everything on ONE better-sqlite3 connection. Its mutex
 * only keeps two transactions apart: a query made outside a transaction while one is open runs
 * on the same connection, inside it. It sees the transaction's uncommitted rows, and when the
 * transaction rolls back, that query's writes are undone with it, though its caller was told
 * they succeeded.
 *
 * `serializeSqlite` wraps the adapter factory so the connection is either free for plain
 * queries or owned by one transaction: a transaction waits until the plain queries in flight
 * are done, and plain queries wait while a transaction is open (first come, first served).
 * Queries through a transaction's own client (`tx`) never wait. `scopeTransactionCallbacks`
 * marks the async context of every `$transaction` callback, so a query made inside it through
 * the plain client (which would otherwise wait for its own transaction: a deadlock) runs on
 * the transaction, as before; such nesting is a bug to fix, so it is reported once.
 */

type Adapter = Awaited<ReturnType<PrismaBetterSqlite3["connect"]>>;
type AdapterTransaction = Awaited<ReturnType<Adapter["startTransaction"]>>;
type Query = Parameters<Adapter["queryRaw"]>[0];
type IsolationLevel = Parameters<Adapter["startTransaction"]>[0];

/** One transaction's ownership of the connection; `release` is idempotent. */
export interface Lease {
  release(): void;
}

interface Waiter {
  exclusive: boolean;
  grant: (lease: Lease | null) => void;
}

/**
 * Shared (plain queries) / exclusive (a transaction) ownership of the connection, granted in
 * arrival order, so a stream of plain queries cannot starve a waiting transaction.
 */
export class ConnectionGate {
  #holder: Lease | null = null;
  #shared = 0;
  readonly #queue: Waiter[] = [];

  /** The lease of the open transaction, if any. */
  get holder(): Lease | null {
    return this.#holder;
  }

  /** Takes a shared hold without waiting when nothing is open or queued (the hot path). */
  tryShared(): boolean {
    if (this.#holder !== null || this.#queue.length > 0) return false;
    this.#shared++;
    return true;
  }

  shared(): Promise<void> {
    if (this.tryShared()) return Promise.resolve();
    return new Promise((resolve) => this.#queue.push({ exclusive: false, grant: () => resolve() }));
  }

  releaseShared(): void {
    this.#shared--;
    if (this.#shared === 0) this.#dispatch();
  }

  exclusive(): Promise<Lease> {
    if (this.#holder === null && this.#shared === 0 && this.#queue.length === 0) return Promise.resolve(this.#newLease());
    return new Promise((resolve) => this.#queue.push({ exclusive: true, grant: (lease) => resolve(lease!) }));
  }

  #newLease(): Lease {
    const lease: Lease = {
      release: () => {
        if (this.#holder !== lease) return;
        this.#holder = null;
        this.#dispatch();
      },
    };
    this.#holder = lease;
    return lease;
  }

  #dispatch(): void {
    while (this.#queue.length > 0 && this.#holder === null) {
      const next = this.#queue[0]!;
      if (next.exclusive) {
        if (this.#shared > 0) return;
        this.#queue.shift();
        next.grant(this.#newLease());
      } else {
        this.#queue.shift();
        this.#shared++;
        next.grant(null);
      }
    }
  }
}

/** The lease of the transaction whose callback the current async context belongs to. */
const callbackScope = new AsyncLocalStorage<Lease | null>();

let nestedReported = false;
function reportNested(sql: string): void {
  if (nestedReported) return;
  nestedReported = true;
  process.emitWarning(
    `a query through the plain database client ran inside a $transaction callback; it joined that transaction (use the callback's client): ${sql.slice(0, 120)}`,
    { code: "CAPSTAN_SQLITE_NESTED_QUERY" },
  );
}

class SerializedAdapter {
  readonly provider: Adapter["provider"];
  readonly adapterName: string;

  constructor(
    private readonly inner: Adapter,
    private readonly gate: ConnectionGate,
  ) {
    this.provider = inner.provider;
    this.adapterName = inner.adapterName;
  }

  queryRaw(query: Query) {
    return this.outside(() => this.inner.queryRaw(query), query.sql);
  }

  executeRaw(query: Query) {
    return this.outside(() => this.inner.executeRaw(query), query.sql);
  }

  executeScript(script: string) {
    return this.outside(() => this.inner.executeScript(script), script);
  }

  async startTransaction(isolationLevel?: IsolationLevel): Promise<AdapterTransaction> {
    if (this.inOwnCallback()) {
      // SQLite has no nested BEGIN: waiting for ourselves would only end at maxWait.
      throw new Error("A transaction cannot be started through the plain client inside a $transaction callback; use the callback's client.");
    }
    const lease = await this.gate.exclusive();
    try {
      return new LeasedTransaction(await this.inner.startTransaction(isolationLevel), lease);
    } catch (err) {
      lease.release();
      throw err;
    }
  }

  dispose() {
    return this.inner.dispose();
  }

  /**
   * Runs `run` on the adapter's own better-sqlite3 connection under the same rule as a plain
   * query (plain-writer.ts: statements prepared once, without Prisma's per-query work).
   */
  direct<T>(sql: string, run: (connection: SqliteConnection) => T): Promise<T> {
    const connection = (this.inner as unknown as { client?: unknown }).client;
    if (!isSqliteConnection(connection)) throw new Error("@prisma/adapter-better-sqlite3 no longer exposes its connection as `client`: plain-writer.ts needs another way to it");
    return this.outside(async () => run(connection), sql);
  }

  private inOwnCallback(): boolean {
    const holder = this.gate.holder;
    return holder !== null && callbackScope.getStore() === holder;
  }

  /** Runs a plain query while no transaction is open (or inside its own transaction's callback). */
  private outside<T>(run: () => Promise<T>, sql: string): Promise<T> {
    if (this.gate.tryShared()) return this.holding(run);
    if (this.inOwnCallback()) {
      reportNested(sql);
      return run();
    }
    return this.gate.shared().then(() => this.holding(run));
  }

  private holding<T>(run: () => Promise<T>): Promise<T> {
    let pending: Promise<T>;
    try {
      pending = run();
    } catch (err) {
      this.gate.releaseShared();
      return Promise.reject(err);
    }
    return pending.finally(() => this.gate.releaseShared());
  }
}

/** The adapter's transaction, giving the connection back when Prisma ends it. */
class LeasedTransaction {
  readonly provider: AdapterTransaction["provider"];
  readonly adapterName: string;
  readonly options: AdapterTransaction["options"];

  constructor(
    private readonly inner: AdapterTransaction,
    private readonly lease: Lease,
  ) {
    this.provider = inner.provider;
    this.adapterName = inner.adapterName;
    this.options = inner.options;
  }

  queryRaw(query: Query) {
    return this.inner.queryRaw(query);
  }

  executeRaw(query: Query) {
    return this.inner.executeRaw(query);
  }

  // Prisma has already sent COMMIT/ROLLBACK through executeRaw (usePhantomQuery is false).
  async commit(): Promise<void> {
    try {
      await this.inner.commit();
    } finally {
      this.lease.release();
    }
  }

  async rollback(): Promise<void> {
    try {
      await this.inner.rollback();
    } finally {
      this.lease.release();
    }
  }

  async createSavepoint(name: string): Promise<void> {
    await this.inner.createSavepoint!(name);
  }

  async rollbackToSavepoint(name: string): Promise<void> {
    await this.inner.rollbackToSavepoint!(name);
  }

  async releaseSavepoint(name: string): Promise<void> {
    await this.inner.releaseSavepoint!(name);
  }
}

/** The part of a better-sqlite3 connection plain-writer.ts uses. */
export type SqliteConnection = Pick<Sqlite.Database, "prepare">;

const isSqliteConnection = (c: unknown): c is SqliteConnection => typeof c === "object" && c !== null && typeof (c as { prepare?: unknown }).prepare === "function";

/** The better-sqlite3 adapter factory, serialised as described above. */
export class SerializedSqliteFactory {
  readonly provider: PrismaBetterSqlite3["provider"];
  readonly adapterName: string;
  /** The adapter Prisma connected last (it connects again after a $disconnect). */
  #connected: SerializedAdapter | null = null;

  constructor(
    private readonly inner: PrismaBetterSqlite3,
    readonly gate: ConnectionGate = new ConnectionGate(),
  ) {
    this.provider = inner.provider;
    this.adapterName = inner.adapterName;
  }

  async connect(): Promise<Adapter> {
    this.#connected = new SerializedAdapter(await this.inner.connect(), this.gate);
    return this.#connected;
  }

  /** SerializedAdapter.direct on the connected adapter; Prisma must have connected (any query). */
  direct<T>(sql: string, run: (connection: SqliteConnection) => T): Promise<T> {
    if (!this.#connected) return Promise.reject(new Error("the SQLite adapter is not connected yet"));
    return this.#connected.direct(sql, run);
  }
}

interface TransactionCapable {
  $transaction: (...args: never[]) => unknown;
}

/**
 * Runs every interactive `$transaction` callback of this client (and of its transaction
 * clients, which read the property from it) in an async context that names its transaction.
 */
export function scopeTransactionCallbacks<C extends TransactionCapable>(client: C, gate: ConnectionGate): C {
  const original = client.$transaction as unknown as (this: unknown, arg: unknown, options?: unknown) => unknown;
  const scoped = function (this: unknown, arg: unknown, options?: unknown): unknown {
    if (typeof arg !== "function") return original.call(this, arg, options);
    const callback = arg as (tx: unknown) => unknown;
    // The callback starts once its transaction holds the connection: that lease is its own.
    return original.call(this, (tx: unknown) => callbackScope.run(gate.holder, () => callback(tx)), options);
  };
  (client as unknown as { $transaction: unknown }).$transaction = scoped;
  return client;
}
