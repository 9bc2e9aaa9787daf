import type { JobType } from "@capstan/shared";

/**
 * A job that ended, as an outcome handler reads it: its payload opened (plain JSON), its result
 * (JSON) or error as stored, and when it ended.
 */
export interface EndedJob<T extends JobType = JobType> {
  id: string;
  serverId: number;
  type: T;
  /** The payload, opened: JSON text ("null" when this instance's key cannot open it). */
  payload: string;
  /** succeeded | failed | cancelled */
  status: string;
  attempt: number;
  deadlineAt: Date;
  result: string | null;
  error: string | null;
  finishedAt: Date | null;
}

/**
 * What the end of a job of type T means for its resource (a deployment ends, a backup records
 * its file, a network becomes active...). Called once per ended job, by the replica that ended
 * it, or by the repair sweep (jobs/repair-sweep.ts) of any replica when that one died before it
 * was applied; a handler must be safe to run again (conditional updates), since a replica may
 * die after its writes and before the job is marked applied.
 */
export type OutcomeHandler<T extends JobType> = (job: EndedJob<T>) => Promise<void>;

/**
 * The one outcome map: every job type has an entry, a handler or null (nothing to apply: the
 * job's caller waits for its answer, or its end changes no record). A job type added to JOBS
 * in shared/src/protocol/jobs.ts without deciding its entry here does not compile (as the
 * agent's HandlerMap). Built once at start (jobs/outcome-map.ts), given to the queue.
 */
export type OutcomeMap = { [T in JobType]: OutcomeHandler<T> | null };

/**
 * Several handlers of one job type, run in turn in the order given. Each runs even when one
 * before it failed; the first failure is thrown at the end, so the outcome is not marked
 * applied and the repair sweep runs them all again (they bear it).
 */
export function inTurn<T extends JobType>(...handlers: OutcomeHandler<T>[]): OutcomeHandler<T> {
  return async (job) => {
    let failure: unknown = null;
    for (const handler of handlers) {
      try {
        await handler(job);
      } catch (err) {
        failure ??= err;
      }
    }
    if (failure !== null) throw failure;
  };
}
