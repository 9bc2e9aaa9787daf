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
import { requireFeature } from "../domain/features.js";
import { errorResponse, HttpError, STATUS_OF } from "./errors.js";

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

  it("a lost race (Prisma's error codes) is the domain error it amounts to, with that kind's status", () => {
    expect(errorResponse({ code: "P2025" })?.status).toBe(STATUS_OF.not_found);
    for (const code of ["P2003", "P2002", "P2034"]) expect(errorResponse({ code })?.status, code).toBe(STATUS_OF.conflict);
    expect(errorResponse({ code: "P2028" })).toEqual({ status: STATUS_OF.unavailable, body: { message: expect.stringContaining("retry it in a moment") }, headers: { "Retry-After": "2" } });
    expect(errorResponse({ code: "P1001" })).toBeNull();
    // A domain error is never taken for a race, whatever else it carries.
    expect(errorResponse(Object.assign(new Forbidden(), { code: "P2025" }))?.status).toBe(403);
  });

  it("the percent-encoding failure the router marks with status 400 is a 400; other URIErrors are not mapped", () => {
    expect(errorResponse(Object.assign(new URIError("URI malformed"), { status: 400 }))).toEqual({ status: 400, body: { message: "Malformed percent-encoding in the request path." } });
    expect(errorResponse(new URIError("URI malformed"))).toBeNull();
  });

  it("a feature the caller's team lacks is PaymentRequired, 402, naming the feature and how to enable it", () => {
    const caller = { tokenId: 1, teamId: 7, userId: 1, role: "owner" as const, scopes: new Set(["read" as const]), features: new Set(["DNS_PROVIDER_MANAGEMENT" as const]) };
    expect(() => requireFeature(caller, "DNS_PROVIDER_MANAGEMENT")).not.toThrow();
    let thrown: unknown;
    try {
      requireFeature(caller, "REGISTRY_MANAGEMENT");
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(PaymentRequired);
    expect(errorResponse(thrown)).toEqual({
      status: 402,
      body: { message: "This needs the paid feature REGISTRY_MANAGEMENT, which is not enabled for this team. An instance administrator enables it with: capstan team features --team <id> --enable REGISTRY_MANAGEMENT" },
    });
  });
});
