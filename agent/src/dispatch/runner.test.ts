import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { JobAck, JobOutcome, JobProgress, JobType } from "@capstan/shared";
import { StateStore } from "../state/store.js";
import { OutcomeOutbox, type Transport } from "./outbox.js";
import { JobRunner, MAX_LINES_PER_BATCH } from "./runner.js";
import type { HandlerMap, JobContext } from "./types.js";

/** A control plane double: records what the agent sends; acks outcomes unless told not to. */
class FakeTransport implements Transport {
  connected = true;
  /** socket.io's id of the current connection: a reconnect changes it. */
  connection = "c1";
  ackOutcomes = true;
  outcomes: JobOutcome[] = [];
  progress: JobProgress[] = [];
  isConnected() {
    return this.connected;
  }
  connectionId() {
    return this.connected ? this.connection : undefined;
  }
  sendOutcome(o: JobOutcome) {
    this.outcomes.push(structuredClone(o));
    return this.ackOutcomes ? Promise.resolve({ ok: true }) : Promise.reject(new Error("operation has timed out"));
  }
  sendProgress(p: JobProgress) {
    this.progress.push(structuredClone(p));
  }
}

const deferred = <T = void>() => {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
};

const notImplemented = async () => {
  throw new Error("not used");
};
function handlers(over: Partial<HandlerMap>): HandlerMap {
  return {
    "server.validate": notImplemented,
    "server.prepare": notImplemented,
    "containers.list": notImplemented,
    "container.ensure": notImplemented,
    "container.remove": notImplemented,
    ...over,
  } as HandlerMap;
}

const inAMinute = () => new Date(Date.now() + 60_000).toISOString();
const env = (id: string, type: JobType, payload: unknown, attempt = 1, deadline = inAMinute()) => ({ id, attempt, type, payload, deadline });
/** An envelope of a control plane that reads outcomes in acks. */
const answerWithin = (ms: number, id: string, type: JobType, payload: unknown, attempt = 1) => ({ ...env(id, type, payload, attempt), answer_within_ms: ms });

let dir: string;
let store: StateStore;
let transport: FakeTransport;
let outbox: OutcomeOutbox;

async function setup(h: HandlerMap, opts: { retryMs?: number; progressIntervalMs?: number; answeredSettleMs?: number } = {}) {
  store = await StateStore.open(dir);
  transport = new FakeTransport();
  outbox = new OutcomeOutbox(store, transport, { retryMs: opts.retryMs ?? 20, answeredSettleMs: opts.answeredSettleMs });
  const runner = new JobRunner({ handlers: h, store, outbox, transport, progressIntervalMs: opts.progressIntervalMs ?? 20 });
  return runner;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "capstan-agent-runner-"));
});
afterEach(async () => {
  outbox?.stop();
  await store?.flush();
  // An outcome's ack can still land after stop() (its file rewritten as acked): rm retries past that write.
  await rm(dir, { recursive: true, force: true, maxRetries: 5 });
});

describe("JobRunner", () => {
  it("acks, runs the handler with the parsed payload, and sends a validated outcome", async () => {
    const remove = vi.fn(async (p: { name: string }) => ({ removed: p.name === "web" }));
    const runner = await setup(handlers({ "container.remove": remove }));
    const acks: JobAck[] = [];
    runner.onJob(env("j1", "container.remove", { name: "web" }), (a) => acks.push(a));
    expect(acks).toEqual([{ accepted: true }]);
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(1));
    expect(transport.outcomes[0]).toEqual({ id: "j1", attempt: 1, ok: true, result: { removed: true } });
    expect(remove).toHaveBeenCalledTimes(1);
    await vi.waitFor(() => expect(store.getOutcome("j1")?.acked).toBe(true));
  });

  it("a redelivery while running does not run it twice; the outcome carries the newest attempt", async () => {
    const gate = deferred();
    const validate = vi.fn(async () => {
      await gate.promise;
      return { docker_version: "20.10", api_version: "1.41", compose_version: null };
    });
    const runner = await setup(handlers({ "server.validate": validate }));
    const acks: JobAck[] = [];
    runner.onJob(env("j", "server.validate", {}, 1), (a) => acks.push(a));
    runner.onJob(env("j", "server.validate", {}, 3), (a) => acks.push(a));
    runner.onJob(env("j", "server.validate", {}, 2), (a) => acks.push(a)); // late, older attempt
    expect(acks).toEqual([{ accepted: true }, { accepted: true }, { accepted: true }]);
    gate.resolve();
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(1));
    expect(validate).toHaveBeenCalledTimes(1);
    expect(transport.outcomes[0]).toMatchObject({ id: "j", attempt: 3, ok: true });
  });

  it("a redelivery after it finished re-sends the stored outcome with the new attempt, without rerunning", async () => {
    const list = vi.fn(async () => ({ containers: [] }));
    const runner = await setup(handlers({ "containers.list": list }));
    runner.onJob(env("j", "containers.list", {}, 1));
    await vi.waitFor(() => expect(store.getOutcome("j")?.acked).toBe(true));
    runner.onJob(env("j", "containers.list", {}, 2));
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(2));
    expect(transport.outcomes[1]).toEqual({ id: "j", attempt: 2, ok: true, result: { containers: [] } });
    expect(list).toHaveBeenCalledTimes(1);
    await vi.waitFor(() => expect(store.getOutcome("j")).toMatchObject({ acked: true, outcome: { attempt: 2 } }));
  });

  it("dedupes across an agent restart through the state dir", async () => {
    const list = vi.fn(async () => ({ containers: [] }));
    const first = await setup(handlers({ "containers.list": list }));
    first.onJob(env("j", "containers.list", {}, 1));
    await vi.waitFor(() => expect(store.getOutcome("j")?.acked).toBe(true));
    outbox.stop();
    await store.flush();

    const second = await setup(handlers({ "containers.list": list }));
    second.onJob(env("j", "containers.list", {}, 2));
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(1));
    expect(transport.outcomes[0]).toMatchObject({ id: "j", attempt: 2, ok: true });
    expect(list).toHaveBeenCalledTimes(1);
  });

  it("rejects an invalid envelope and still reports a failed outcome when it can", async () => {
    const runner = await setup(handlers({}));
    const acks: JobAck[] = [];
    runner.onJob({ id: "bad", attempt: 1, type: "no.such.job", payload: {}, deadline: inAMinute() }, (a) => acks.push(a));
    runner.onJob({ nonsense: true }, (a) => acks.push(a));
    runner.onJob(env("late", "server.validate", {}, 1, "not a date"), (a) => acks.push(a));
    expect(acks.map((a) => a.accepted)).toEqual([false, false, false]);
    expect(acks[0]?.reason).toMatch(/invalid job envelope: type/);
    expect(acks[2]?.reason).toMatch(/deadline/);
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(2));
    expect(transport.outcomes.map((o) => [o.id, o.ok])).toEqual([
      ["bad", false],
      ["late", false],
    ]);
  });

  it("rejects an invalid payload with field reasons, and reports it failed", async () => {
    const ensure = vi.fn();
    const runner = await setup(handlers({ "container.ensure": ensure }));
    const acks: JobAck[] = [];
    runner.onJob(env("j", "container.ensure", { name: "bad name!", image: "" }), (a) => acks.push(a));
    expect(acks[0]?.accepted).toBe(false);
    expect(acks[0]?.reason).toMatch(/invalid container.ensure payload: name: invalid Docker object name/);
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(1));
    expect(transport.outcomes[0]).toMatchObject({ id: "j", ok: false, error: expect.stringMatching(/image/) });
    expect(ensure).not.toHaveBeenCalled();
  });

  it("turns a thrown error or an invalid result into ok:false and keeps going", async () => {
    const runner = await setup(
      handlers({
        "container.remove": async () => {
          throw new Error("engine exploded");
        },
        "containers.list": async () => ({ containers: "nope" }) as never,
      }),
    );
    runner.onJob(env("a", "container.remove", { name: "x" }));
    runner.onJob(env("b", "containers.list", {}));
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(2));
    const byId = Object.fromEntries(transport.outcomes.map((o) => [o.id, o]));
    expect(byId.a).toEqual({ id: "a", attempt: 1, ok: false, error: "engine exploded" });
    expect(byId.b).toMatchObject({ ok: false, error: expect.stringMatching(/containers.list returned an invalid result: containers/) });
  });

  it("job:cancel aborts the handler's signal and reports the job cancelled", async () => {
    let seen: AbortSignal | undefined;
    const runner = await setup(
      handlers({
        "server.validate": (_p, ctx: JobContext) => {
          seen = ctx.signal;
          return new Promise(() => {}); // never settles on its own
        },
      }),
    );
    runner.onJob(env("j", "server.validate", {}));
    expect(runner.isRunning("j")).toBe(true);
    runner.onCancel({ id: "j" });
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(1));
    expect(seen?.aborted).toBe(true);
    expect(transport.outcomes[0]).toMatchObject({ ok: false, error: "cancelled by the control plane" });
    expect(runner.isRunning("j")).toBe(false);
  });

  it("a cancel that arrives before its job fails the job without running it", async () => {
    const validate = vi.fn();
    const runner = await setup(handlers({ "server.validate": validate }));
    runner.onCancel({ id: "early" });
    runner.onJob(env("early", "server.validate", {}));
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(1));
    expect(transport.outcomes[0]).toMatchObject({ ok: false, error: expect.stringMatching(/cancelled/) });
    expect(validate).not.toHaveBeenCalled();
  });

  it("aborts at the envelope's deadline; a job already past it does not start", async () => {
    const validate = vi.fn((_p: unknown, ctx: JobContext) => new Promise<never>((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason))));
    const runner = await setup(handlers({ "server.validate": validate as never }));
    runner.onJob(env("soon", "server.validate", {}, 1, new Date(Date.now() + 50).toISOString()));
    runner.onJob(env("past", "server.validate", {}, 1, new Date(Date.now() - 1000).toISOString()));
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(2));
    const byId = Object.fromEntries(transport.outcomes.map((o) => [o.id, o]));
    expect(byId.soon).toMatchObject({ ok: false, error: expect.stringMatching(/^deadline exceeded \(deadline /) });
    expect(byId.past).toMatchObject({ ok: false, error: expect.stringMatching(/deadline exceeded before the job started/) });
    expect(validate).toHaveBeenCalledTimes(1);
  });

  it("batches progress lines: at most 500 a batch, under the newest attempt, flushed before the outcome", async () => {
    const gate = deferred();
    const runner = await setup(
      handlers({
        "container.remove": async (_p, ctx) => {
          for (let i = 0; i < 1203; i++) ctx.progress(`line ${i}`);
          await gate.promise;
          ctx.progress("last");
          return { removed: false };
        },
      }),
      { progressIntervalMs: 30 },
    );
    runner.onJob(env("j", "container.remove", { name: "x" }));
    expect(transport.progress).toHaveLength(0); // nothing sent synchronously: batched
    await vi.waitFor(() => expect(transport.progress.length).toBeGreaterThanOrEqual(1));
    runner.onJob(env("j", "container.remove", { name: "x" }, 2));
    gate.resolve();
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(1));
    const lines = transport.progress.flatMap((p) => p.lines);
    expect(lines).toHaveLength(1204);
    expect(lines[0]).toBe("line 0");
    expect(lines.at(-1)).toBe("last");
    expect(Math.max(...transport.progress.map((p) => p.lines.length))).toBeLessThanOrEqual(MAX_LINES_PER_BATCH);
    expect(transport.progress.at(-1)?.attempt).toBe(2);
    expect(transport.outcomes[0]?.attempt).toBe(2);
  });
});

describe("OutcomeOutbox", () => {
  it("retries until acked, waits while disconnected, and re-sends persisted outcomes after a restart", async () => {
    const runner = await setup(handlers({ "containers.list": async () => ({ containers: [] }) }));
    transport.ackOutcomes = false;
    outbox.start();
    runner.onJob(env("j", "containers.list", {}));
    await vi.waitFor(() => expect(transport.outcomes.length).toBeGreaterThanOrEqual(3)); // retried every 20 ms
    expect(store.getOutcome("j")?.acked).toBe(false);

    transport.connected = false;
    const sent = transport.outcomes.length;
    await new Promise((r) => setTimeout(r, 80));
    expect(transport.outcomes.length).toBe(sent); // nothing sent while disconnected
    outbox.stop();
    await store.flush();

    // "Restart": a new store and outbox over the same directory.
    const again = await StateStore.open(dir);
    const t2 = new FakeTransport();
    const o2 = new OutcomeOutbox(again, t2, { retryMs: 20 });
    expect(again.pending()).toHaveLength(1);
    o2.kick();
    await vi.waitFor(() => expect(again.getOutcome("j")?.acked).toBe(true));
    expect(t2.outcomes).toEqual([{ id: "j", attempt: 1, ok: true, result: { containers: [] } }]);
    o2.stop();
    await again.flush();
  });
});

describe("outcomes answered in the job's ack (answer_within_ms)", () => {
  const list = () => vi.fn(async () => ({ containers: [] }));

  it("a job that ends in time is answered in its ack: no job:outcome, and the outcome settles once its connection stayed up", async () => {
    const runner = await setup(handlers({ "containers.list": list() }), { answeredSettleMs: 60 });
    outbox.start();
    const acks: JobAck[] = [];
    runner.onJob(answerWithin(500, "j", "containers.list", {}), (a) => acks.push(a));
    expect(acks).toEqual([]); // held for the outcome
    await vi.waitFor(() => expect(acks).toHaveLength(1));
    expect(acks[0]).toEqual({ accepted: true, outcome: { id: "j", attempt: 1, ok: true, result: { containers: [] } } });
    expect(store.getOutcome("j")?.acked).toBe(false); // kept until it settles
    await vi.waitFor(() => expect(store.getOutcome("j")?.acked).toBe(true));
    expect(transport.outcomes).toEqual([]);
    // A redelivery (the control plane could not store it) is answered from the store, as job:outcome.
    runner.onJob(answerWithin(500, "j", "containers.list", {}, 2), (a) => acks.push(a));
    expect(acks[1]).toEqual({ accepted: true });
    await vi.waitFor(() => expect(transport.outcomes).toEqual([{ id: "j", attempt: 2, ok: true, result: { containers: [] } }]));
  });

  it("a job longer than the window is acked when the window ends; its outcome goes as job:outcome", async () => {
    const gate = deferred();
    const runner = await setup(handlers({ "containers.list": async () => (await gate.promise, { containers: [] }) }));
    const acks: JobAck[] = [];
    runner.onJob(answerWithin(30, "j", "containers.list", {}), (a) => acks.push(a));
    await vi.waitFor(() => expect(acks).toEqual([{ accepted: true }]));
    gate.resolve();
    await vi.waitFor(() => expect(transport.outcomes).toEqual([{ id: "j", attempt: 1, ok: true, result: { containers: [] } }]));
    await vi.waitFor(() => expect(store.getOutcome("j")?.acked).toBe(true));
    expect(acks).toHaveLength(1);
  });

  it("an answered outcome whose connection ended before it settled is sent again after the reconnect", async () => {
    const runner = await setup(handlers({ "containers.list": list() }), { answeredSettleMs: 60_000 });
    const acks: JobAck[] = [];
    runner.onJob(answerWithin(500, "j", "containers.list", {}), (a) => acks.push(a));
    await vi.waitFor(() => expect(acks[0]?.outcome).toBeDefined());
    outbox.kick();
    expect(transport.outcomes).toEqual([]); // same connection, not settled yet: not sent
    transport.connection = "c2";
    outbox.kick(true); // what the connection does on every connect
    expect(transport.outcomes).toEqual([{ id: "j", attempt: 1, ok: true, result: { containers: [] } }]);
    await vi.waitFor(() => expect(store.getOutcome("j")?.acked).toBe(true));
  });

  it("answers plainly when the connection changed while the job ran, when a redelivery raised its attempt, and when disconnected", async () => {
    const gates = [deferred(), deferred()];
    let call = 0;
    const runner = await setup(handlers({ "containers.list": async () => (await gates[call++]?.promise, { containers: [] }) }));
    const acks: JobAck[] = [];
    runner.onJob(answerWithin(1000, "a", "containers.list", {}), (a) => acks.push(a));
    transport.connection = "c2";
    gates[0]!.resolve();
    await vi.waitFor(() => expect(acks).toEqual([{ accepted: true }]));
    await vi.waitFor(() => expect(transport.outcomes.map((o) => o.id)).toEqual(["a"]));

    runner.onJob(answerWithin(1000, "b", "containers.list", {}, 1), (a) => acks.push(a));
    runner.onJob(answerWithin(1000, "b", "containers.list", {}, 2), (a) => acks.push(a)); // redelivered while running
    gates[1]!.resolve();
    await vi.waitFor(() => expect(acks).toHaveLength(3));
    expect(acks.slice(1)).toEqual([{ accepted: true }, { accepted: true }]);
    await vi.waitFor(() => expect(transport.outcomes.map((o) => [o.id, o.attempt])).toEqual([["a", 1], ["b", 2]]));

    transport.connected = false;
    runner.onJob(answerWithin(1000, "c", "containers.list", {}), (a) => acks.push(a));
    expect(acks[3]).toEqual({ accepted: true });
  });
});
