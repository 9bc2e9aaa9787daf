import { z } from "zod";
import { HostFacts } from "./facts.js";
import { JobTypeSchema } from "./jobs.js";
import { ServerStatus } from "./status.js";

/** Bumped on any incompatible change of the messages below; checked in the handshake. */
export const PROTOCOL_VERSION = 1;
export const AGENTS_NAMESPACE = "/agents";
export const FLEET_NAMESPACE = "/fleet";

/** socket.io `auth` of an agent connection. */
export const AgentHandshake = z.object({
  token: z.string().min(1).max(200),
  protocol_version: z.number().int(),
  agent_version: z.string().max(64),
});
export type AgentHandshake = z.infer<typeof AgentHandshake>;

/** The longest an agent may hold a job's ack to answer it with the outcome (answer_within_ms). */
export const MAX_ANSWER_WITHIN_MS = 1000;

/**
 * Control plane -> agent: run this job, acked with JobAck on receipt. With `answer_within_ms`
 * (a control plane that reads outcomes in acks) an agent may hold the ack that long and answer
 * with the outcome of a job that ended by then: one frame each way per job, as a plain echo.
 * Agents that do not know the field ack at once and send the outcome as job:outcome.
 */
export const JobEnvelope = z.object({
  id: z.string().min(1).max(64),
  attempt: z.number().int().min(1),
  type: JobTypeSchema,
  payload: z.unknown(),
  deadline: z.iso.datetime(),
  answer_within_ms: z.number().int().min(1).max(MAX_ANSWER_WITHIN_MS).optional(),
});
export type JobEnvelope = z.infer<typeof JobEnvelope>;

export const JobCancel = z.object({ id: z.string().min(1).max(64) });

/** Agent -> control plane: log lines of a running job. */
export const JobProgress = z.object({
  id: z.string(),
  attempt: z.number().int(),
  lines: z.array(z.string().max(8192)).max(500),
});
export type JobProgress = z.infer<typeof JobProgress>;

/** Agent -> control plane: outcome of one attempt; acked by the control plane once stored. */
export const JobOutcome = z.discriminatedUnion("ok", [
  z.object({ id: z.string(), attempt: z.number().int(), ok: z.literal(true), result: z.unknown() }),
  z.object({ id: z.string(), attempt: z.number().int(), ok: z.literal(false), error: z.string().max(8192) }),
]);
export type JobOutcome = z.infer<typeof JobOutcome>;

/** The agent's ack of a delivery; `outcome` (of this delivery's attempt) when it answers in the ack. */
export const JobAck = z.object({ accepted: z.boolean(), reason: z.string().optional(), outcome: JobOutcome.optional() });
export type JobAck = z.infer<typeof JobAck>;

/** Sent on connect (EV.hello, acked) and periodically after (EV.facts). */
export const AgentHello = z.object({ facts: HostFacts });
export type AgentHello = z.infer<typeof AgentHello>;

/**
 * The control plane's ack of every outcome, including stale or unknown ones: an ack means
 * "stop re-sending"; `stored` says whether it changed the job.
 */
export const OutcomeAck = z.object({ stored: z.boolean() });
export type OutcomeAck = z.infer<typeof OutcomeAck>;
export const StandDown = z.object({ reason: z.string() });

/** Event names, one place. */
export const EV = {
  hello: "hello",
  facts: "facts",
  job: "job",
  jobCancel: "job:cancel",
  jobProgress: "job:progress",
  jobOutcome: "job:outcome",
  standDown: "stand-down",
  serverStatus: "server:status",
  /** agent -> control plane: ResourceStatusReport; control plane -> fleet: ResourceStatusEvent */
  resourceStatus: "resource:status",
} as const;

/** Fleet stream (dashboards): one message per connectivity change of a team's server. */
export const ServerStatusEvent = z.object({
  uuid: z.string(),
  name: z.string(),
  status: ServerStatus,
  last_seen_at: z.string().nullable(),
  agent_version: z.string().nullable(),
  at: z.string(),
});
export type ServerStatusEvent = z.infer<typeof ServerStatusEvent>;
