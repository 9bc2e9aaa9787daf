import type { ErrorRequestHandler, RequestHandler } from "express";
import { z } from "zod";
import type { Logger } from "pino";
import { Busy, Conflict, DomainError, Invalid, NotFound, removedMeanwhile, Unavailable, type DomainErrorKind, type FieldErrors } from "../domain/errors.js";
import { lostRace, type LostRace } from "../db/errors.js";

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
 * Failures only the HTTP edge knows (a request body in the wrong media type or encoding, one
 * that cannot be read, a path that does not decode): everything a rule decides is a domain
 * error instead.
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

/**
 * A write that lost a race with a concurrent request (db/errors.ts): what the client must hear
 * is that the object changed under it, not a 500. Found by the route fuzz on PostgreSQL: two
 * deletes of one project, a database created in an environment being deleted. Domain errors,
 * so they get their status from STATUS_OF like every other.
 */
const RACE_ERRORS: Record<LostRace, () => DomainError> = {
  missing: () => removedMeanwhile(),
  "reference-gone": () => new Conflict("Something this request refers to was removed or changed while it ran; read it again and retry."),
  duplicate: () => new Conflict("Another request created the same thing at the same time; read it again."),
  conflict: () => new Conflict("The request collided with a concurrent change; retry it."),
  overloaded: () => new Unavailable("The database could not take this request in time (too many requests changing the same thing at once); retry it in a moment.", 2),
};

const raceOf = (err: unknown): LostRace | undefined => (err instanceof DomainError || err instanceof HttpError ? undefined : lostRace(err));

/**
 * A path whose percent-encoding does not decode (`/projects/%ZZ`): the router marks the
 * URIError it got from decodeURIComponent with status 400 before any handler runs.
 */
function pathDecodeError(err: unknown): HttpError | undefined {
  if (err instanceof URIError && (err as { status?: unknown }).status === 400) {
    return new HttpError(400, "Malformed percent-encoding in the request path.");
  }
  return undefined;
}

/**
 * The response for a domain or edge error, a lost race (as the domain error it amounts to) or
 * the router's path decoding failure; null for anything else (an unexpected error: a bare 500).
 */
export function errorResponse(err: unknown): ErrorResponse | null {
  const race = raceOf(err);
  const e = race ? RACE_ERRORS[race]() : (pathDecodeError(err) ?? err);
  if (e instanceof DomainError) {
    const out: ErrorResponse = { status: STATUS_OF[e.kind], body: { message: e.message } };
    if (e instanceof Invalid) out.body.errors = e.errors;
    if (e instanceof Busy || (e instanceof Unavailable && e.retryAfterSeconds !== undefined)) out.headers = { "Retry-After": String(e.retryAfterSeconds) };
    return out;
  }
  if (e instanceof HttpError) return { status: e.status, body: { message: e.message } };
  return null;
}

/**
 * The message list of one field, created as an own property: field names come from clients, and
 * `out["constructor"] ??= []` would find Object's constructor (and "__proto__" the prototype),
 * a 500 the route fuzz found. Repeated messages are kept once.
 */
export function addFieldError(errors: FieldErrors, key: string, message: string): void {
  if (!Object.hasOwn(errors, key)) Object.defineProperty(errors, key, { value: [], enumerable: true, writable: true, configurable: true });
  const list = errors[key]!;
  if (!list.includes(message)) list.push(message);
}

/** Field errors keyed by dotted path; prefix distinguishes path/query parameters where it matters. */
export function fieldErrorsOf(error: z.ZodError): FieldErrors {
  const out: FieldErrors = {};
  for (const issue of error.issues) {
    const missing = issue.code === "invalid_type" && /received undefined$/.test(issue.message);
    // An unknown field is named as a field of its own, so a client sees which one to drop.
    const keys = issue.code === "unrecognized_keys" ? issue.keys.map((k) => [...issue.path, k].join(".")) : [issue.path.length ? issue.path.join(".") : "body"];
    for (const key of keys) addFieldError(out, key, missing ? "This field is required." : issue.message);
  }
  return out;
}

export const unknownRoute: RequestHandler = (_req, _res, next) => next(new NotFound("Route", "Not found."));

/** Content-Encoding values a request body may carry (body-parser inflates them; docs/decisions.md). */
export const BODY_ENCODINGS = ["identity", "gzip", "deflate", "br"] as const;

/**
 * A failure of reading or parsing a request body (express.json / express.raw, i.e. body-parser)
 * as the client error it is, or undefined when it is a fault of ours (body-parser's 500s). The
 * body readers hand their errors through this (http/app.ts). body-parser gives its client errors
 * a 4xx status; a body that claims a Content-Encoding it does not have fails inside zlib and
 * comes as a bare 400 without a `type`, which must not become a 500.
 */
export function bodyReadError(err: unknown, contentEncoding: string | undefined): HttpError | undefined {
  const e = err as { type?: unknown; status?: unknown; limit?: unknown } | null;
  if (!e || typeof e !== "object") return undefined;
  switch (e.type) {
    case "entity.parse.failed":
      return new HttpError(400, "Malformed JSON in request body.");
    case "entity.too.large":
      return new HttpError(413, `Request body too large: the limit is ${String(e.limit)} bytes.`);
    case "encoding.unsupported":
      return new HttpError(415, `Unsupported Content-Encoding: send the body uncompressed or compressed with ${BODY_ENCODINGS.slice(1).join(", ")}.`);
    case "charset.unsupported":
      return new HttpError(415, "Unsupported request body encoding; send UTF-8 JSON.");
    case "request.size.invalid":
      return new HttpError(400, "The request body does not match its Content-Length.");
    case "request.aborted":
      return new HttpError(400, "The request body was not sent completely.");
  }
  if (typeof e.status !== "number" || e.status < 400 || e.status >= 500) return undefined;
  const encoding = (contentEncoding ?? "identity").trim().toLowerCase();
  if (encoding !== "identity") return new HttpError(400, `The request body could not be decompressed: it is not valid ${encoding} data.`);
  return new HttpError(400, "The request body could not be read.");
}

/** Domain and edge errors, lost races and the router's path decoding failure as errorResponse says; everything unknown a bare 500. */
export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let status = 500;
    let body: { message: string; errors?: FieldErrors } = { message: "Internal server error." };
    const known = errorResponse(err);
    if (known) {
      const race = raceOf(err);
      if (race) log.warn({ err, race, req: { id: req.id, method: req.method, path: req.originalUrl.split("?")[0] } }, "request lost a race with a concurrent change");
      status = known.status;
      body = known.body;
      if (known.headers) res.set(known.headers);
    } else {
      log.error({ err, req: { id: req.id, method: req.method, path: req.originalUrl.split("?")[0] } }, "unhandled error");
    }
    if (res.headersSent) return;
    res.status(status).json(body);
  };
}
