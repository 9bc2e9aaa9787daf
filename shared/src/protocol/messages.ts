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

/** Control plane -> agent: run this job (acked with JobAck on receipt, before running). */
export const JobEnvelope = z.object({
  id: z.string().min(1).max(64),
  attempt: z.number().int().min(1),
  type: JobTypeSchema,
  payload: z.unknown(),
  deadline: z.iso.datetime(),
});
export type JobEnvelope = z.infer<typeof JobEnvelope>;

export const JobAck = z.object({ accepted: z.boolean(), reason: z.string().optional() });
export type JobAck = z.infer<typeof JobAck>;

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
