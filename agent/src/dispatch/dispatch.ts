import { z } from "zod";
import { JOBS, JobEnvelope, type JobPayload, type JobResult, type JobType } from "@capstan/shared";
import type { Handler, HandlerMap, JobContext } from "./types.js";

export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

function describe(error: z.ZodError): string {
  return error.issues
    .map((i) => (i.path.length ? `${i.path.map(String).join(".")}: ${i.message}` : i.message))
    .join("; ");
}

export function parseEnvelope(raw: unknown): Parsed<JobEnvelope> {
  const parsed = JobEnvelope.safeParse(raw);
  if (!parsed.success) return { ok: false, reason: `invalid job envelope: ${describe(parsed.error)}` };
  if (Number.isNaN(Date.parse(parsed.data.deadline))) {
    return { ok: false, reason: `invalid job envelope: deadline: not a date (${parsed.data.deadline.slice(0, 64)})` };
  }
  return { ok: true, value: parsed.data };
}

export function parsePayload<K extends JobType>(type: K, payload: unknown): Parsed<JobPayload<K>> {
  const schema = JOBS[type].payload as unknown as z.ZodType<JobPayload<K>>;
  const parsed = schema.safeParse(payload);
  if (!parsed.success) return { ok: false, reason: `invalid ${type} payload: ${describe(parsed.error)}` };
  return { ok: true, value: parsed.data };
}

export function parseResult<K extends JobType>(type: K, result: unknown): Parsed<JobResult<K>> {
  const schema = JOBS[type].result as unknown as z.ZodType<JobResult<K>>;
  const parsed = schema.safeParse(result);
  if (!parsed.success) return { ok: false, reason: `handler for ${type} returned an invalid result: ${describe(parsed.error)}` };
  return { ok: true, value: parsed.data };
}

/** Runs the handler for `type` and validates what it returns against JOBS[type].result. */
export async function dispatch<K extends JobType>(
  handlers: HandlerMap,
  type: K,
  payload: JobPayload<K>,
  ctx: JobContext,
): Promise<JobResult<K>> {
  const handler = handlers[type] as Handler<K>;
  const result = await handler(payload, ctx);
  const checked = parseResult(type, result);
  if (!checked.ok) throw new Error(checked.reason);
  return checked.value;
}
