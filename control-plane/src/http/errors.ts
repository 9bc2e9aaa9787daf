import type { ErrorRequestHandler, RequestHandler } from "express";
import { z } from "zod";
import type { Logger } from "pino";
import { Busy, DomainError, Invalid, NotFound, type DomainErrorKind, type FieldErrors } from "../domain/errors.js";

export type { FieldErrors };

/**
 * The status of each kind of domain error (domain/errors.ts): the one place where what went wrong
 * becomes an HTTP status. Exhaustive: a new kind does not compile until it has its status here.
 */
export const STATUS_OF: Record<DomainErrorKind, number> = {
  rejected: 400,
  unauthenticated: 401,
  payment_required: 402,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  invalid: 422,
  busy: 429,
  internal: 500,
  upstream_failed: 502,
  unavailable: 503,
};

/**
 * Failures only the HTTP edge knows (a request body in the wrong media type): everything a rule
 * decides is a domain error instead.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface ErrorResponse {
  status: number;
  body: { message: string; errors?: FieldErrors };
  headers?: Record<string, string>;
}

/** The response for a domain or edge error; null for anything else (an unexpected error: a bare 500). */
export function errorResponse(err: unknown): ErrorResponse | null {
  if (err instanceof DomainError) {
    const out: ErrorResponse = { status: STATUS_OF[err.kind], body: { message: err.message } };
    if (err instanceof Invalid) out.body.errors = err.errors;
    if (err instanceof Busy) out.headers = { "Retry-After": String(err.retryAfterSeconds) };
    return out;
  }
  if (err instanceof HttpError) return { status: err.status, body: { message: err.message } };
  return null;
}

/** Field errors keyed by dotted path; prefix distinguishes path/query parameters where it matters. */
export function fieldErrorsOf(error: z.ZodError): FieldErrors {
  const out: FieldErrors = {};
  for (const issue of error.issues) {
    const missing = issue.code === "invalid_type" && /received undefined$/.test(issue.message);
    // An unknown field is named as a field of its own, so a client sees which one to drop.
    const keys = issue.code === "unrecognized_keys" ? issue.keys.map((k) => [...issue.path, k].join(".")) : [issue.path.length ? issue.path.join(".") : "body"];
    for (const key of keys) (out[key] ??= []).push(missing ? "This field is required." : issue.message);
  }
  return out;
}

export const unknownRoute: RequestHandler = (_req, _res, next) => next(new NotFound("Route", "Not found."));

/** Domain and edge errors as errorResponse says; body-parser failures as clear client errors; everything unknown a bare 500. */
export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let status = 500;
    let body: { message: string; errors?: FieldErrors } = { message: "Internal server error." };
    const known = errorResponse(err);
    if (known) {
      status = known.status;
      body = known.body;
      if (known.headers) res.set(known.headers);
    } else if (err?.type === "entity.parse.failed") {
      status = 400;
      body = { message: "Malformed JSON in request body." };
    } else if (err?.type === "entity.too.large") {
      status = 413;
      body = { message: `Request body too large: the limit is ${err.limit} bytes.` };
    } else if (err?.type === "encoding.unsupported" || err?.type === "charset.unsupported") {
      status = 415;
      body = { message: "Unsupported request body encoding; send UTF-8 JSON." };
    } else {
      log.error({ err, req: { id: req.id, method: req.method, path: req.originalUrl.split("?")[0] } }, "unhandled error");
    }
    if (res.headersSent) return;
    res.status(status).json(body);
  };
}
