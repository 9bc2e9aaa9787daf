/**
 * What the control plane's rules say went wrong, in the domain's terms. Services, compose/,
 * jobs/ and everything else below http/ throw these; http/errors.ts alone turns them into a
 * status, headers and the spec's `{message, errors?}` body (one table, one middleware).
 * Messages are written for the API's users: they are sent as they are.
 */

/** Field errors keyed by the REST field names of the request (spec section 7). */
export type FieldErrors = Record<string, string[]>;

export abstract class DomainError extends Error {
  /** Which kind of failure: the key http/errors.ts maps to a status. */
  abstract readonly kind: DomainErrorKind;
}

/** Nothing of that id in the caller's team, or nothing the caller may see (never named). */
export class NotFound extends DomainError {
  readonly kind = "not_found";
  /** what: "Application", "Backup schedule"... The message defaults to "<what> not found.". */
  constructor(
    readonly what = "Resource",
    message = `${what} not found.`,
  ) {
    super(message);
  }
}

/**
 * The object was there when the request began, and a concurrent request removed it while this
 * one ran (a lost race, or a read that found it half gone: db/relations.ts).
 */
export function removedMeanwhile(what = "Resource"): NotFound {
  return new NotFound(what, "Not found: it was removed while this request ran.");
}

/** The caller sees the object but its role or permission level does not allow the action. */
export class Forbidden extends DomainError {
  readonly kind = "forbidden";
  constructor(message = "You do not have permission to perform this action.") {
    super(message);
  }
}

/** The request's values break a rule; `errors` names each field at fault (REST field names). */
export class Invalid extends DomainError {
  readonly kind = "invalid";
  constructor(
    readonly errors: FieldErrors,
    message = "The given data was invalid.",
  ) {
    super(message);
  }
}

/** The action collides with the current state (a name taken, something still in use or running). */
export class Conflict extends DomainError {
  readonly kind = "conflict";
}

/** Refused for now because a bounded queue or limit is full; worth retrying after retryAfterSeconds. */
export class Busy extends DomainError {
  readonly kind = "busy";
  constructor(
    readonly retryAfterSeconds: number,
    message: string,
  ) {
    super(message);
  }
}

/** A paid feature that is not enabled for the caller's team. */
export class PaymentRequired extends DomainError {
  readonly kind = "payment_required";
  constructor(
    readonly feature: string,
    message = `${feature} is not enabled for this team.`,
  ) {
    super(message);
  }
}

/** The request cannot be carried out as asked, and no single field is at fault (a state that does not allow it, a malformed payload). */
export class Rejected extends DomainError {
  readonly kind = "rejected";
}

/** The caller could not be authenticated (an inbound webhook whose signature does not verify). */
export class Unauthenticated extends DomainError {
  readonly kind = "unauthenticated";
}

/**
 * Something the request needs is not reachable now (a server's agent not connected, not
 * answering), or the database could not take the request in time; retryAfterSeconds when a
 * retry soon is likely to work.
 */
export class Unavailable extends DomainError {
  readonly kind = "unavailable";
  constructor(
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** Something the request relied on answered with a failure (an agent's job failed, a git provider's API refused). */
export class UpstreamFailed extends DomainError {
  readonly kind = "upstream_failed";
}

/** Stored state this instance cannot use (a secret its key cannot open): the instance's fault, said plainly. */
export class Internal extends DomainError {
  readonly kind = "internal";
}

export type DomainErrorKind =
  | "not_found"
  | "forbidden"
  | "invalid"
  | "conflict"
  | "busy"
  | "payment_required"
  | "rejected"
  | "unauthenticated"
  | "unavailable"
  | "upstream_failed"
  | "internal";
