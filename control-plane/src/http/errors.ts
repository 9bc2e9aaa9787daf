import type { ErrorRequestHandler, RequestHandler } from "express";
import { z } from "zod";
import type { Logger } from "pino";

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

export const unknownRoute: RequestHandler = (_req, _res, next) => next(new AppError(404, "Not found."));

/** Maps body-parser failures to clear client errors; everything unknown becomes a bare 500. */
export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let status = 500;
    let body: { message: string; errors?: FieldErrors } = { message: "Internal server error." };
    if (err instanceof AppError) {
      status = err.status;
      body = err.errors ? { message: err.message, errors: err.errors } : { message: err.message };
      if (err.headers) res.set(err.headers);
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
