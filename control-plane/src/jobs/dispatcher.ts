import type { JobAck, JobEnvelope } from "@capstan/shared";

/**
 * What the durable queue needs from whatever carries jobs to agents: the queue is given one
 * (JobQueue.attachDispatcher) and knows nothing of sockets; the agents' gateway
 * (agents/gateway.ts) implements it for the agents connected to this replica.
 */
export interface JobDispatcher {
  /** Whether a job for this server can be handed to its agent through this replica now. */
  canDeliver(serverId: number): boolean;
  /** The servers whose agents this replica can hand jobs to now. */
  deliverable(): number[];
  /**
   * Hands a job to the server's agent; resolves with the agent's ack, or null when it was not
   * delivered (not connected here, no ack in time): the pump or the next reconnect retries.
   */
  deliver(serverId: number, envelope: JobEnvelope): Promise<JobAck | null>;
  /** Tells the server's agent to stop a job, when that agent is connected here (else nothing). */
  cancel(serverId: number, jobId: string): void;
}

/** Before a gateway is attached (the CLI, tests of the queue alone): no agent is reachable. */
export const NO_DISPATCHER: JobDispatcher = {
  canDeliver: () => false,
  deliverable: () => [],
  deliver: async () => null,
  cancel: () => {},
};
