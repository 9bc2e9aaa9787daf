import { io, type Socket } from "socket.io-client";
import { sampleHostFacts } from "../../support/host-facts.js";
import { AGENTS_NAMESPACE, EV, FLEET_NAMESPACE, PROTOCOL_VERSION, type HostFacts, type JobEnvelope } from "@capstan/shared";

/**
 * A scripted agent speaking the real wire protocol: it lets the control plane's side of the
 * link (auth, delivery, redelivery, fencing, deadlines) be tested move by move. The real
 * agent is exercised against real engines in test/e2e.
 */
export const sampleFacts = sampleHostFacts();

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
  close(): void;
}

export function connectAgent(
  baseUrl: string,
  token: string,
  opts: { protocolVersion?: number; autoAck?: boolean } = {},
): Promise<ScriptedAgent> {
  const socket = io(baseUrl + AGENTS_NAMESPACE, {
    transports: ["websocket"],
    reconnection: false,
    auth: { token, protocol_version: opts.protocolVersion ?? PROTOCOL_VERSION, agent_version: "test-0.0.1" },
  });
  const jobs: JobEnvelope[] = [];
  const waiters: ((j: JobEnvelope) => void)[] = [];
  let taken = 0;
  socket.on(EV.job, (envelope: JobEnvelope, ack: (r: unknown) => void) => {
    jobs.push(envelope);
    if (opts.autoAck !== false) ack({ accepted: true });
    waiters.shift()?.(envelope);
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
        nextJob(timeoutMs = 5000) {
          if (taken < jobs.length) return Promise.resolve(jobs[taken++]!);
          return new Promise((res, rej) => {
            const timer = setTimeout(() => rej(new Error("no job arrived")), timeoutMs);
            waiters.push((j) => {
              clearTimeout(timer);
              taken++;
              res(j);
            });
          });
        },
        hello: (facts = sampleFacts) => socket.timeout(5000).emitWithAck(EV.hello, { facts }),
        outcome: (o, opts) => {
          const newest = Math.max(o.attempt, ...jobs.filter((j) => j.id === o.id).map((j) => j.attempt));
          return socket.timeout(5000).emitWithAck(EV.jobOutcome, opts?.asGiven ? o : { ...o, attempt: newest });
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
