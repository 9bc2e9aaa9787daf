import type { ErrorRequestHandler, RequestHandler } from "express";
import { z } from "zod";
import type { Logger } from "pino";
import { lostRace } from "../db/errors.js";

export type FieldErrors = Record<string, string[]>;

/** The one error type handlers throw; the error middleware turns it into {message, errors?}. */
export class AppError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errors?: FieldErrors,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

export const notFound = (what = "Resource") => new AppError(404, `${what} not found.`);
export const forbidden = (message = "You do not have permission to perform this action.") => new AppError(403, message);
export const conflict = (message: string) => new AppError(409, message);
export const invalid = (errors: FieldErrors, message = "The given data was invalid.") => new AppError(422, message, errors);
/** A paid feature the team does not have (spec section 7: 402; docs/features.md). */
export const paymentRequired = (feature: string) =>
  new AppError(402, `This needs the paid feature ${feature}, which is not enabled for this team. An instance administrator enables it with: capstan team features --team <id> --enable ${feature}`);

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

export const unknownRoute: RequestHandler = (_req, _res, next) => next(new AppError(404, "Not found."));

/** Content-Encoding values a request body may carry (body-parser inflates them; docs/decisions.md). */
export const BODY_ENCODINGS = ["identity", "gzip", "deflate", "br"] as const;

/**
 * A failure of reading or parsing a request body (express.json / express.raw, i.e. body-parser)
 * as the client error it is, or undefined when it is a fault of ours (body-parser's 500s). The
 * body readers hand their errors through this (http/app.ts). body-parser gives its client errors
 * a 4xx status; a body that claims a Content-Encoding it does not have fails inside zlib and
 * comes as a bare 400 without a `type`, which must not become a 500.
 */
export function bodyReadError(err: unknown, contentEncoding: string | undefined): AppError | undefined {
  const e = err as { type?: unknown; status?: unknown; limit?: unknown } | null;
  if (!e || typeof e !== "object") return undefined;
  switch (e.type) {
    case "entity.parse.failed":
      return new AppError(400, "Malformed JSON in request body.");
    case "entity.too.large":
      return new AppError(413, `Request body too large: the limit is ${String(e.limit)} bytes.`);
    case "encoding.unsupported":
      return new AppError(415, `Unsupported Content-Encoding: send the body uncompressed or compressed with ${BODY_ENCODINGS.slice(1).join(", ")}.`);
    case "charset.unsupported":
      return new AppError(415, "Unsupported request body encoding; send UTF-8 JSON.");
    case "request.size.invalid":
      return new AppError(400, "The request body does not match its Content-Length.");
    case "request.aborted":
      return new AppError(400, "The request body was not sent completely.");
  }
  if (typeof e.status !== "number" || e.status < 400 || e.status >= 500) return undefined;
  const encoding = (contentEncoding ?? "identity").trim().toLowerCase();
  if (encoding !== "identity") return new AppError(400, `The request body could not be decompressed: it is not valid ${encoding} data.`);
  return new AppError(400, "The request body could not be read.");
}

/**
 * A path whose percent-encoding does not decode (`/projects/%ZZ`): the router marks the
 * URIError it got from decodeURIComponent with status 400 before any handler runs.
 */
function pathDecodeError(err: unknown): AppError | undefined {
  if (err instanceof URIError && (err as { status?: unknown }).status === 400) {
    return new AppError(400, "Malformed percent-encoding in the request path.");
  }
  return undefined;
}

/**
 * A write that lost a race with a concurrent request (db/errors.ts): what the client must hear
 * is that the object changed under it, not a 500. Found by the route fuzz on PostgreSQL: two
 * deletes of one project, a database created in an environment being deleted.
 */
const RACE_ANSWERS = {
  missing: () => new AppError(404, "Not found: it was removed while this request ran."),
  "reference-gone": () => new AppError(409, "Something this request refers to was removed or changed while it ran; read it again and retry."),
  duplicate: () => new AppError(409, "Another request created the same thing at the same time; read it again."),
  conflict: () => new AppError(409, "The request collided with a concurrent change; retry it."),
} as const;

/** Maps AppErrors, lost races and the router's path decoding failure to client errors; everything unknown becomes a bare 500. */
export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let status = 500;
    let body: { message: string; errors?: FieldErrors } = { message: "Internal server error." };
    const race = err instanceof AppError ? undefined : lostRace(err);
    if (race) log.warn({ err, race, req: { id: req.id, method: req.method, path: req.originalUrl.split("?")[0] } }, "request lost a race with a concurrent change");
    const known = err instanceof AppError ? err : race ? RACE_ANSWERS[race]() : pathDecodeError(err);
    if (known) {
      status = known.status;
      body = known.errors ? { message: known.message, errors: known.errors } : { message: known.message };
      if (known.headers) res.set(known.headers);
    } else {
      log.error({ err, req: { id: req.id, method: req.method, path: req.originalUrl.split("?")[0] } }, "unhandled error");
    }
    if (res.headersSent) return;
    res.status(status).json(body);
  };
}
