import { io, type Socket } from "socket.io-client";
import { sampleHostFacts } from "../../support/host-facts.js";
import { AGENTS_NAMESPACE, EV, FLEET_NAMESPACE, PROTOCOL_VERSION, type HostFacts, type JobEnvelope } from "@capstan/shared";

/**
 * A scripted agent speaking the real wire protocol: it lets the control plane's side of the
 * link (auth, delivery, redelivery, fencing, deadlines) be tested move by move. The real
 * agent is exercised against real engines in test/e2e.
 */
export const sampleFacts = sampleHostFacts();

/**
 * How long an emit waits for the control plane's ack, and nextJob / nextCancel for a message.
 * A CI machine running three suites on two cores has held an outcome's ack past 5 s; the real
 * agent waits 30 s and resends meanwhile (agent/src/connection/connection.ts). 20 s leaves a
 * failure named before the test's own 30 s.
 */
const ACK_WAIT_MS = 20_000;

export interface ScriptedAgent {
  socket: Socket;
  jobs: JobEnvelope[];
  nextJob(timeoutMs?: number): Promise<JobEnvelope>;
  hello(facts?: HostFacts): Promise<unknown>;
  /**
   * Reports an outcome under the newest attempt received for that job, as the real agent
   * does after a redelivery; `asGiven` sends the attempt unchanged (to test fencing).
   */
  outcome(
    o: { id: string; attempt: number; ok: true; result: unknown } | { id: string; attempt: number; ok: false; error: string },
    opts?: { asGiven?: boolean },
  ): Promise<unknown>;
  /** Sends progress lines of a job (under the newest attempt received, as outcome does). */
  progress(id: string, lines: string[]): void;
  /** Ids of the jobs the control plane told this agent to cancel, in arrival order. */
  cancels: string[];
  /** Resolves with the id of the next job:cancel (already received ones first). */
  nextCancel(timeoutMs?: number): Promise<string>;
  /**
   * Answers every job of the type from now on (and those already received but not taken)
   * with the script, instead of queueing it for nextJob.
   */
  serve(type: JobEnvelope["type"], script: JobScript): void;
  close(): void;
}

/**
 * How a served job is answered: after delayMs (default 0), with progress lines first. "hold"
 * keeps it running until it is cancelled (then it reports the cancel, as the real agent does)
 * or the test sends its outcome itself.
 */
export type JobAnswer =
  | { delayMs?: number; lines?: string[]; ok: true; result: unknown }
  | { delayMs?: number; lines?: string[]; ok: false; error: string }
  | { hold: true; lines?: string[] };
export type JobScript = (job: JobEnvelope) => JobAnswer;

export function connectAgent(
  baseUrl: string,
  token: string,
  /** answerInAck: served jobs answered at once (no delay, not held) go in the delivery's ack when the envelope offers it, as the real agent does. */
  opts: { protocolVersion?: number; autoAck?: boolean; answerInAck?: boolean } = {},
): Promise<ScriptedAgent> {
  const socket = io(baseUrl + AGENTS_NAMESPACE, {
    transports: ["websocket"],
    reconnection: false,
    auth: { token, protocol_version: opts.protocolVersion ?? PROTOCOL_VERSION, agent_version: "test-0.0.1" },
  });
  const jobs: JobEnvelope[] = [];
  const waiters: ((j: JobEnvelope) => void)[] = [];
  /** Received jobs not yet taken by nextJob (served ones never wait here). */
  const pending: JobEnvelope[] = [];
  const scripts = new Map<string, JobScript>();
  const served = new Set<string>();
  const held = new Map<string, JobEnvelope>();
  const cancels: string[] = [];
  const cancelWaiters: ((id: string) => void)[] = [];
  let cancelsTaken = 0;
  const newest = (id: string, attempt: number) => Math.max(attempt, ...jobs.filter((j) => j.id === id).map((j) => j.attempt));
  const sendOutcome = (o: { id: string; attempt: number; ok: boolean; result?: unknown; error?: string }) =>
    socket.timeout(ACK_WAIT_MS).emitWithAck(EV.jobOutcome, { ...o, attempt: newest(o.id, o.attempt) }).catch(() => {});
  const sendProgress = (id: string, lines: string[]) => {
    const job = [...jobs].reverse().find((j) => j.id === id);
    if (job) socket.emit(EV.jobProgress, { id, attempt: job.attempt, lines });
  };
  const outcomeOf = (envelope: JobEnvelope, answer: Exclude<JobAnswer, { hold: true }>) =>
    answer.ok ? { id: envelope.id, attempt: envelope.attempt, ok: true, result: answer.result } : { id: envelope.id, attempt: envelope.attempt, ok: false, error: answer.error };
  /** `ack`: the delivery's, not yet answered (jobs received before serve() were acked on arrival). */
  const run = (envelope: JobEnvelope, script: JobScript, ack?: (r: unknown) => void) => {
    // A redelivered job already running here is not started twice (the real agent dedupes by id).
    if (served.has(envelope.id)) {
      if (opts.autoAck !== false) ack?.({ accepted: true });
      return;
    }
    served.add(envelope.id);
    const answer = script(envelope);
    if (ack && opts.answerInAck && envelope.answer_within_ms && !("hold" in answer) && !answer.delayMs) {
      if (answer.lines?.length) sendProgress(envelope.id, answer.lines);
      return ack({ accepted: true, outcome: outcomeOf(envelope, answer) });
    }
    if (opts.autoAck !== false) ack?.({ accepted: true });
    if (answer.lines?.length) sendProgress(envelope.id, answer.lines);
    if ("hold" in answer) {
      held.set(envelope.id, envelope);
      return;
    }
    setTimeout(() => {
      if (!socket.connected) return;
      void sendOutcome(outcomeOf(envelope, answer));
    }, answer.delayMs ?? 0);
  };
  socket.on(EV.job, (envelope: JobEnvelope, ack: (r: unknown) => void) => {
    jobs.push(envelope);
    const script = scripts.get(envelope.type);
    if (script) return run(envelope, script, ack);
    if (opts.autoAck !== false) ack({ accepted: true });
    const waiter = waiters.shift();
    if (waiter) waiter(envelope);
    else pending.push(envelope);
  });
  socket.on(EV.jobCancel, (raw: { id: string }) => {
    cancels.push(raw.id);
    cancelWaiters.shift()?.(raw.id);
    const job = held.get(raw.id);
    if (job) {
      held.delete(raw.id);
      void sendOutcome({ id: job.id, attempt: job.attempt, ok: false, error: "cancelled by the control plane" });
    }
  });
  return new Promise((resolve, reject) => {
    socket.once("connect_error", (err) => {
      socket.close();
      reject(err);
    });
    socket.once("connect", () =>
      resolve({
        socket,
        jobs,
        nextJob(timeoutMs = ACK_WAIT_MS) {
          if (pending.length) return Promise.resolve(pending.shift()!);
          return new Promise((res, rej) => {
            const waiter = (j: JobEnvelope) => {
              clearTimeout(timer);
              res(j);
            };
            // A waiter that gave up leaves the queue, so the next job is not handed to it and lost.
            const timer = setTimeout(() => {
              waiters.splice(waiters.indexOf(waiter), 1);
              rej(new Error("no job arrived"));
            }, timeoutMs);
            waiters.push(waiter);
          });
        },
        hello: (facts = sampleFacts) => socket.timeout(ACK_WAIT_MS).emitWithAck(EV.hello, { facts }),
        progress: sendProgress,
        cancels,
        nextCancel(timeoutMs = ACK_WAIT_MS) {
          if (cancelsTaken < cancels.length) return Promise.resolve(cancels[cancelsTaken++]!);
          return new Promise((res, rej) => {
            const waiter = (id: string) => {
              clearTimeout(timer);
              cancelsTaken++;
              res(id);
            };
            const timer = setTimeout(() => {
              cancelWaiters.splice(cancelWaiters.indexOf(waiter), 1);
              rej(new Error("no cancel arrived"));
            }, timeoutMs);
            cancelWaiters.push(waiter);
          });
        },
        serve(type, script) {
          scripts.set(type, script);
          for (const j of pending.filter((p) => p.type === type)) {
            pending.splice(pending.indexOf(j), 1);
            run(j, script);
          }
        },
        outcome: (o, opts) => {
          const newest = Math.max(o.attempt, ...jobs.filter((j) => j.id === o.id).map((j) => j.attempt));
          return socket
            .timeout(ACK_WAIT_MS)
            .emitWithAck(EV.jobOutcome, opts?.asGiven ? o : { ...o, attempt: newest })
            .catch((err: Error) => {
              throw new Error(`the outcome of job ${o.id} (attempt ${newest}) was not acked within ${ACK_WAIT_MS / 1000} s: ${err.message}`);
            });
        },
        close: () => socket.close(),
      }),
    );
  });
}

export function connectFleet(baseUrl: string, token: string): Promise<Socket> {
  const socket = io(baseUrl + FLEET_NAMESPACE, { transports: ["websocket"], reconnection: false, auth: { token } });
  return new Promise((resolve, reject) => {
    socket.once("connect_error", (err) => {
      socket.close();
      reject(err);
    });
    socket.once("connect", () => resolve(socket));
  });
}
