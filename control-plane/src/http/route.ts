import type { Request, Response } from "express";
import { z } from "zod";
import type { Feature, TokenScope } from "@capstan/shared";
import type { Caller } from "../domain/caller.js";
import type { TeamScope } from "../domain/scope.js";
import type { Services } from "../services/index.js";

export type HttpMethod = "get" | "post" | "patch" | "put" | "delete";

type AnyObject = z.ZodObject<z.ZodRawShape>;
type Infer<T> = T extends z.ZodType ? z.output<T> : Record<string, never>;

export interface HandlerInput<P, Q, B> {
  params: Infer<P>;
  query: Infer<Q>;
  body: Infer<B>;
  /** Who asks (undefined on routes with auth "none"). */
  caller: Caller;
  /** The caller's team scope for this request: service methods take it (undefined on routes with auth "none"). */
  scope: TeamScope;
  services: Services;
  req: Request;
  res: Response;
}

export interface HandlerResult {
  status?: number;
  body: unknown;
  /** The handler wrote the response itself (a stream): nothing more is sent. */
  handled?: boolean;
}

export interface ResponseSpec {
  description: string;
  schema?: z.ZodType;
  /** Media type of a response that is not JSON (e.g. text/event-stream). */
  contentType?: string;
}

/**
 * One entry of the route table. The table drives the express router, the OpenAPI
 * document and the cross-team test matrix, so a route exists in all three or none.
 */
export interface RouteSpec<P = unknown, Q = unknown, B = unknown> {
  method: HttpMethod;
  /** OpenAPI form, relative to /api/v1: /projects/{uuid} */
  path: string;
  tag: string;
  summary: string;
  description?: string;
  /** Defaults: GET read; everything else write. Deployment triggers say deploy. */
  scope?: TokenScope;
  /**
   * "none": no bearer token is needed and none is checked (inbound webhooks, which the
   * handler authenticates itself by signature; `caller` and `scope` are then undefined). The rate limit by
   * client address still applies. Default "token".
   */
  auth?: "token" | "none";
  /**
   * The paid feature the route needs (shared/src/api/features.ts). A team without it gets
   * 402 naming the feature, after the token and scope checks and before anything else
   * (validation, lookups): docs/features.md. Token routes only.
   */
  feature?: Feature;
  /**
   * Team owners and admins only: what the route does, in the words of its 403 ("manage
   * registries": "Only team owners and admins can manage registries."). Checked after
   * validation, before the handler; the OpenAPI description says so. Token routes only.
   */
  adminOnly?: string;
  /** The body is handed over unparsed as a Buffer in `req.body` (signatures over the raw bytes); `body` must be unset. */
  rawBody?: { description: string };
  params?: P;
  query?: Q;
  /**
   * The request body: built with requestBody() (shared/src/api/common.ts), so every object in it
   * is strict and an unknown field is a 422 naming it; createApp refuses a route whose body is
   * not. A route without `body` takes no fields at all (an empty object or no body).
   */
  body?: B;
  /**
   * Body fields other clients send (Coolify's v4 API, docs/compatibility.md) that this route
   * accepts and ignores, each with the reason. They are removed before the body is validated,
   * never reach the handler, and must be listed in docs/compatibility.md (a test checks it).
   */
  compatibleFields?: Readonly<Record<string, string>>;
  responses: Record<number, ResponseSpec>;
  /**
   * GET only: the 200 body depends on nothing but the caller's team's projects, environments,
   * project and environment permissions, memberships, and which applications and databases
   * exist in which environment (the rows and columns the TeamVersion triggers watch,
   * prisma/migrations/*_team_version*) and on who asks, so it may be served from the response
   * cache (http/response-cache.ts). A route showing anything else (a resource's status or
   * settings, servers...) must not set this before the triggers watch that data too: it would
   * be stale.
   */
  teamVersioned?: boolean;
  handler(input: HandlerInput<P, Q, B>): Promise<HandlerResult>;
}

export type AnyRoute = RouteSpec<AnyObject | undefined, AnyObject | undefined, z.ZodType | undefined>;

export function route<
  P extends AnyObject | undefined = undefined,
  Q extends AnyObject | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
>(spec: RouteSpec<P, Q, B>): AnyRoute {
  return spec as unknown as AnyRoute;
}

export function requiredScope(r: Pick<AnyRoute, "method" | "scope">): TokenScope {
  return r.scope ?? (r.method === "get" ? "read" : "write");
}

export function expressPath(path: string): string {
  return path.replace(/\{([a-zA-Z_]+)\}/g, ":$1");
}
