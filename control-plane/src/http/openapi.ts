import { z } from "zod";
import { API_VERSION, ErrorBody } from "@capstan/shared";
import { requiredScope, type AnyRoute } from "./route.js";

type JsonObject = Record<string, unknown>;

const COMPONENT_PREFIX = "#/components/schemas/";

/**
 * Converts one zod schema to JSON Schema 2020-12 (OpenAPI 3.1's dialect), hoisting named
 * schemas (those with .meta({id})) into components so they appear once.
 */
function toSchema(schema: z.ZodType, io: "input" | "output", components: JsonObject): JsonObject {
  const json = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
  }) as JsonObject;
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewrite);
    if (node && typeof node === "object") {
      const out: JsonObject = {};
      for (const [k, v] of Object.entries(node)) {
        if (k === "$ref" && typeof v === "string") out[k] = v.replace(/^#\/\$defs\//, COMPONENT_PREFIX);
        else out[k] = rewrite(v);
      }
      return out;
    }
    return node;
  };
  const defs = (json.$defs ?? {}) as JsonObject;
  for (const [id, def] of Object.entries(defs)) components[id] = rewrite(def);
  delete json.$defs;
  delete json.$schema;
  const top = rewrite(json) as JsonObject;
  const id = top.id;
  if (typeof id === "string") {
    delete top.id;
    components[id] = top;
    return { $ref: COMPONENT_PREFIX + id };
  }
  return top;
}

/** One line per tag of the route table; a tag missing here is a lint warning (tag-description). */
const TAG_DESCRIPTIONS: Record<string, string> = {
  Teams: "Read-only views of the token's team and its members (spec 4.1). Teams, members and tokens are managed with the `capstan` CLI.",
  Projects: "Projects and their environments (spec 4.2). Every new project gets a `production` environment.",
  Servers: "Hosts reached over SSH on which resources run (spec 4.3).",
  Applications: "Applications built from git repositories, container build files, images or compose files (spec 4.4).",
  Databases: "Standalone databases by engine type (spec 4.5).",
  Services: "One-click compose-template services (spec 4.6).",
  Deployments: "Records of each deploy: status, logs, cancel (spec 4.7).",
  Webhooks: "Inbound git push webhooks that deploy an application (spec 6.2), signed per provider; no token.",
  Networks: "Server-scoped container networks (spec 4.8).",
  Registries: "Container registry credentials pushed to servers (spec 4.9).",
  "Resource backups": "Cron-scheduled backups of volumes and configuration (spec 4.10).",
  "Template sources": "Git repositories supplying compose service templates (spec 4.11).",
  Clusters: "Swarm clusters: nodes, services, secrets, configs, events (spec 4.12).",
  Permissions: "Project-level permissions and environment overrides of team members (spec 4.13).",
  DNS: "DNS providers, managed domains and per-resource hostnames (spec 4.14).",
  "Label overrides": "User-supplied proxy labels for template service containers (spec 4.15).",
  "Git apps": "Installed git apps (GitHub Apps) whose installation tokens clone private repositories. The private key and webhook secret are stored encrypted and never returned.",
  "Private keys": "SSH private keys of the team. The private part is stored encrypted and never returned.",
  "S3 storages": "S3-compatible destinations of database backups; the integer id is a schedule's s3_storage_id. Keys and the encryption passphrase are stored encrypted and never returned.",
  "Database backups": "Cron backup schedules of standalone databases, their executions, and restore (spec 4.5).",
};

/** Descriptions of shared parameters whose schemas carry none. */
const PARAMETER_DESCRIPTIONS: Record<string, string> = {
  page: "Page number, from 1. With page or per_page the list is paginated and the body carries `meta`; without both, every item is returned.",
  per_page: "Items per page, 1 to 100 (default 15 when only page is given).",
};

function parameters(schema: AnyRoute["params"], where: "path" | "query", components: JsonObject) {
  if (!schema) return [];
  return Object.entries(schema.shape).map(([name, field]) => {
    const s = toSchema(field as z.ZodType, "output", components);
    const description = typeof s.description === "string" ? s.description : PARAMETER_DESCRIPTIONS[name];
    return {
      name,
      in: where,
      required: where === "path" || !(field as z.ZodType).safeParse(undefined).success,
      ...(description ? { description } : {}),
      schema: s,
    };
  });
}

const capitalize = (w: string) => w.charAt(0).toUpperCase() + w.slice(1);
const camel = (s: string) => s.split(/[-_]/).filter(Boolean).map(capitalize).join("");

/** get /projects/{uuid}/environments -> getProjectsByUuidEnvironments */
export function operationId(r: Pick<AnyRoute, "method" | "path">): string {
  const words = r.path
    .split("/")
    .filter(Boolean)
    .map((seg) => (seg.startsWith("{") ? "By" + camel(seg.slice(1, -1)) : camel(seg)));
  return r.method + words.join("");
}

const ref = (kind: "headers" | "responses", name: string) => ({ $ref: `#/components/${kind}/${name}` });

/** Every /api/v1 response passes the rate limiter and the request-id middleware. */
const COMMON_HEADERS = {
  "X-RateLimit-Limit": ref("headers", "RateLimitLimit"),
  "X-RateLimit-Remaining": ref("headers", "RateLimitRemaining"),
  "X-RateLimit-Reset": ref("headers", "RateLimitReset"),
  "X-Request-Id": ref("headers", "RequestId"),
};

const HEADERS = {
  RateLimitLimit: { description: "Requests allowed per minute for this token (or client address without a token).", schema: { type: "integer" } },
  RateLimitRemaining: { description: "Requests left in the current one-minute window.", schema: { type: "integer" } },
  RateLimitReset: { description: "Unix timestamp (seconds) at which the window resets.", schema: { type: "integer" } },
  RequestId: { description: "The request's id (the client's X-Request-Id when valid, else generated); it appears in the logs.", schema: { type: "string" } },
  RetryAfter: { description: "Seconds to wait before the next request.", schema: { type: "integer" } },
};

const errorResponse = (description: string, extraHeaders: JsonObject = {}) => ({
  description,
  headers: { ...COMMON_HEADERS, ...extraHeaders },
  content: { "application/json": { schema: { $ref: COMPONENT_PREFIX + "Error" } } },
});

/** Errors the request pipeline (not the handler) produces; referenced by the operations they apply to. */
const PIPELINE_RESPONSES = {
  MalformedJson: errorResponse(
    "Malformed request: JSON that does not parse, a body that does not match its Content-Encoding or Content-Length, or a path parameter with malformed percent-encoding",
  ),
  Unauthenticated: errorResponse("Missing or invalid token (message `Unauthenticated.`)"),
  Forbidden: errorResponse("Token lacks the required scope (message `Invalid ability provided.`) or the member lacks permission"),
  PayloadTooLarge: errorResponse("Request body larger than PLATFORM_MAX_BODY_BYTES (default 1 MiB)"),
  UnsupportedMediaType: errorResponse("Request body is not JSON (send Content-Type: application/json), or has a Content-Encoding other than gzip, deflate or br"),
  ValidationFailed: errorResponse("Invalid path parameter, query parameter or body; `errors` maps each field to its problems"),
  PaymentRequired: errorResponse("The paid feature this operation needs (`x-capstan-feature`) is not enabled for the token's team; the message names it"),
  TooManyRequests: errorResponse("Rate limit exceeded; wait until X-RateLimit-Reset", { "Retry-After": ref("headers", "RetryAfter") }),
};

/** Which pipeline errors an operation can answer, keyed by status. */
function pipelineResponses(r: AnyRoute): Record<string, JsonObject> {
  const out: Record<string, JsonObject> = { 429: ref("responses", "TooManyRequests") };
  if (r.auth !== "none") {
    out[401] = ref("responses", "Unauthenticated");
    out[403] = ref("responses", "Forbidden");
  }
  if (r.feature !== undefined) out[402] = ref("responses", "PaymentRequired");
  if (r.params || r.query || r.body) out[422] = ref("responses", "ValidationFailed");
  if (r.rawBody) out[413] = ref("responses", "PayloadTooLarge");
  if (r.body || r.path.includes("{")) out[400] = ref("responses", "MalformedJson");
  if (r.body) {
    out[413] = ref("responses", "PayloadTooLarge");
    out[415] = ref("responses", "UnsupportedMediaType");
  }
  return out;
}

/**
 * A body schema with the route's compatibility fields (accepted and ignored) added as
 * deprecated properties, so a client's generator sees them and knows they do nothing. A nested
 * field (`list[].name`) is added to the items of that array; referenced components on the way
 * are copied inline, so the shared component stays as it is.
 */
function withCompatibleFields(r: AnyRoute, schema: JsonObject, components: JsonObject): JsonObject {
  if (!r.compatibleFields) return schema;
  const inline = (node: JsonObject): JsonObject => {
    const ref = typeof node.$ref === "string" ? (node.$ref as string) : undefined;
    return ref ? (structuredClone(components[ref.slice(COMPONENT_PREFIX.length)]) as JsonObject) : { ...node };
  };
  const add = (node: JsonObject, path: string[], why: string): JsonObject => {
    const out = inline(node);
    const properties = { ...((out.properties as JsonObject | undefined) ?? {}) };
    const [head, ...rest] = path as [string, ...string[]];
    if (rest.length === 0) {
      properties[head] = { deprecated: true, description: `Accepted for compatibility and ignored: ${why} (docs/compatibility.md)` };
    } else {
      const each = head.endsWith("[]");
      const key = each ? head.slice(0, -2) : head;
      const child = properties[key] as JsonObject | undefined;
      if (!child) throw new Error(`OpenAPI: compatibility field ${path.join(".")} of ${r.method} ${r.path}: the body has no ${key}`);
      properties[key] = each ? { ...child, items: add(child.items as JsonObject, rest, why) } : add(child, rest, why);
    }
    return { ...out, properties };
  };
  let out = inline(schema);
  for (const [field, why] of Object.entries(r.compatibleFields)) out = add(out, field.split("."), why);
  return out;
}

/** The OpenAPI 3.1 document, generated from the route table and its zod schemas. */
export function openApiDocument(routes: AnyRoute[]): JsonObject {
  const components: JsonObject = {};
  const errorRef = toSchema(ErrorBody, "output", components);
  const paths: Record<string, JsonObject> = {};
  const operationIds = new Map<string, string>();
  const usedResponses = new Set<string>();
  for (const r of routes) {
    const responses: JsonObject = {};
    for (const [status, spec] of Object.entries(r.responses)) {
      const isError = Number(status) >= 400;
      const schema = spec.schema ? toSchema(spec.schema, "output", components) : isError ? errorRef : undefined;
      responses[status] = {
        description: spec.description,
        headers: COMMON_HEADERS,
        ...(spec.contentType
          ? { content: { [spec.contentType]: { schema: { type: "string" } } } }
          : schema
            ? { content: { "application/json": { schema } } }
            : {}),
      };
    }
    for (const [status, response] of Object.entries(pipelineResponses(r))) {
      if (responses[status]) continue;
      responses[status] = response;
      usedResponses.add(String(response.$ref).split("/").pop()!);
    }
    const sorted = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)));

    const id = operationId(r);
    const clash = operationIds.get(id);
    if (clash) throw new Error(`OpenAPI operationId ${id} of ${r.method} ${r.path} repeats ${clash}`);
    operationIds.set(id, `${r.method} ${r.path}`);

    const scope = requiredScope(r);
    const tokenless = r.auth === "none";
    const op: JsonObject = {
      operationId: id,
      tags: [r.tag],
      summary: r.summary,
      description:
        (r.adminOnly !== undefined ? "Team owners and admins only." + (r.description ? " " : "\n\n") : "") +
        (r.description ? r.description + "\n\n" : "") +
        (tokenless ? "No token: the request is authenticated by its signature." : `Token scope: \`${scope}\`.`) +
        (r.feature ? ` Paid feature: \`${r.feature}\` (402 when the team does not have it).` : ""),
      ...(tokenless ? {} : { "x-capstan-scope": scope }),
      ...(r.feature ? { "x-capstan-feature": r.feature } : {}),
      security: tokenless ? [] : [{ bearerAuth: [scope] }],
      parameters: [...parameters(r.params, "path", components), ...parameters(r.query, "query", components)],
      responses: sorted,
    };
    if (r.body) {
      // A body that may be left out entirely (every field optional) is not required.
      const schema = withCompatibleFields(r, toSchema(r.body, "input", components), components);
      op.requestBody = { required: !r.body.safeParse({}).success, content: { "application/json": { schema } } };
    } else if (r.compatibleFields) {
      const schema = withCompatibleFields(r, { type: "object", properties: {}, additionalProperties: false }, components);
      op.requestBody = { required: false, content: { "application/json": { schema } } };
    } else if (r.rawBody) {
      const any = { type: "object", additionalProperties: true };
      op.requestBody = {
        required: true,
        description: r.rawBody.description,
        content: { "application/json": { schema: any }, "application/x-www-form-urlencoded": { schema: { type: "object", properties: { payload: { type: "string" } } } } },
      };
    }
    (paths[r.path] ??= {})[r.method] = op;
  }
  const tags = [...new Set(routes.map((r) => r.tag))].map((name) =>
    TAG_DESCRIPTIONS[name] ? { name, description: TAG_DESCRIPTIONS[name] } : { name },
  );
  return {
    openapi: "3.1.0",
    info: {
      title: "Capstan API",
      version: API_VERSION,
      description:
        "Team-scoped REST API of Capstan. Every request carries `Authorization: Bearer <token>`; a token sees only its own team. " +
        "Tokens are created with the `capstan token create` command and carry the scopes read, write and deploy.",
      license: { name: "Proprietary", identifier: "LicenseRef-Capstan" },
    },
    servers: [{ url: "/api/v1", description: "This Capstan instance" }],
    tags,
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      schemas: components,
      responses: Object.fromEntries(Object.entries(PIPELINE_RESPONSES).filter(([name]) => usedResponses.has(name))),
      headers: HEADERS,
      securitySchemes: {
        bearerAuth: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "cap_ followed by 40 letters and digits",
          description: "API token; scopes read (GET), write (POST, PATCH, PUT, DELETE), deploy (deployment triggers).",
        },
      },
    },
  };
}
