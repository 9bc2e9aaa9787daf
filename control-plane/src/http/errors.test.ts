import { describe, expect, it } from "vitest";
import {
  Busy,
  Conflict,
  Forbidden,
  Internal,
  Invalid,
  NotFound,
  PaymentRequired,
  Rejected,
  Unauthenticated,
  Unavailable,
  UpstreamFailed,
} from "../domain/errors.js";
import { errorResponse, HttpError } from "./errors.js";

describe("errorResponse: the one mapping of domain errors to HTTP", () => {
  it("gives each kind its status and the spec's {message, errors?} body", () => {
    const cases: [Error, number][] = [
      [new Rejected("no"), 400],
      [new Unauthenticated("who?"), 401],
      [new PaymentRequired("Registries"), 402],
      [new Forbidden(), 403],
      [new NotFound("Application"), 404],
      [new Conflict("taken"), 409],
      [new Invalid({ name: ["bad"] }), 422],
      [new Busy(30, "full"), 429],
      [new Internal("broken"), 500],
      [new UpstreamFailed("agent failed"), 502],
      [new Unavailable("agent away"), 503],
    ];
    for (const [err, status] of cases) expect(errorResponse(err)?.status, err.constructor.name).toBe(status);
  });

  it("keeps the messages services wrote, and names fields only for Invalid", () => {
    expect(errorResponse(new NotFound("Application"))).toEqual({ status: 404, body: { message: "Application not found." } });
    expect(errorResponse(new Forbidden())?.body).toEqual({ message: "You do not have permission to perform this action." });
    expect(errorResponse(new Invalid({ commit_sha: ["x"] }))?.body).toEqual({ message: "The given data was invalid.", errors: { commit_sha: ["x"] } });
    expect(errorResponse(new Invalid({ name: ["x"] }, "Custom."))?.body).toEqual({ message: "Custom.", errors: { name: ["x"] } });
    expect(errorResponse(new PaymentRequired("Registries"))?.body).toEqual({ message: "Registries is not enabled for this team." });
  });

  it("Busy carries Retry-After in seconds", () => {
    expect(errorResponse(new Busy(30, "The deploy queue is full.")))
      .toEqual({ status: 429, body: { message: "The deploy queue is full." }, headers: { "Retry-After": "30" } });
  });

  it("edge-only errors keep their status; anything else is not mapped (a bare 500)", () => {
    expect(errorResponse(new HttpError(415, "Send JSON."))).toEqual({ status: 415, body: { message: "Send JSON." } });
    expect(errorResponse(new Error("boom"))).toBeNull();
    expect(errorResponse({ status: 404, message: "duck-typed" })).toBeNull();
  });
});
