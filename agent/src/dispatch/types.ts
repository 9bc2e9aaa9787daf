import type { JobPayload, JobResult, JobType } from "@capstan/shared";

export interface JobContext {
  /** Fires on job:cancel from the control plane and at the envelope's deadline. */
  signal: AbortSignal;
  /** One log line for the job's progress stream (batched on the wire). */
  progress(line: string): void;
  /** The job being run; `attempt` is the latest delivery's (it may change while running). */
  job: { readonly id: string; readonly attempt: number };
}

export type Handler<K extends JobType> = (payload: JobPayload<K>, ctx: JobContext) => Promise<JobResult<K>>;

/**
 * One handler per job type in shared's JOBS: adding a job type there without a handler here
 * does not compile (see exhaustive.test.ts, which proves it with the TypeScript compiler).
 */
export type HandlerMap = { [K in JobType]: Handler<K> };
