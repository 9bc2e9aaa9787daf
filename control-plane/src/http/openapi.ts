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

function parameters(schema: AnyRoute["params"], where: "path" | "query", components: JsonObject) {
  if (!schema) return [];
  return Object.entries(schema.shape).map(([name, field]) => {
    const s = toSchema(field as z.ZodType, "output", components);
    const description = typeof s.description === "string" ? s.description : undefined;
    return {
      name,
      in: where,
      required: where === "path" || !(field as z.ZodType).safeParse(undefined).success,
      ...(description ? { description } : {}),
      schema: s,
    };
  });
}

function operationId(r: AnyRoute): string {
  const words = r.path
    .split("/")
    .filter(Boolean)
    .map((seg) => seg.replace(/[{}]/g, "").replace(/[-_](\w)/g, (_, c: string) => c.toUpperCase()))
    .map((seg, i) => (i === 0 ? seg : seg.charAt(0).toUpperCase() + seg.slice(1)));
  return r.method + words.map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("");
}

/** The OpenAPI 3.1 document, generated from the route table and its zod schemas. */
export function openApiDocument(routes: AnyRoute[]): JsonObject {
  const components: JsonObject = {};
  const errorRef = toSchema(ErrorBody, "output", components);
  const paths: Record<string, JsonObject> = {};
  for (const r of routes) {
    const responses: JsonObject = {};
    for (const [status, spec] of Object.entries(r.responses)) {
      const schema = spec.schema ?? (Number(status) >= 400 ? ErrorBody : undefined);
      responses[status] = {
        description: spec.description,
        ...(schema
          ? { content: { "application/json": { schema: Number(status) >= 400 && !spec.schema ? errorRef : toSchema(schema, "output", components) } } }
          : {}),
      };
    }
    responses["429"] ??= { description: "Rate limit exceeded", content: { "application/json": { schema: errorRef } } };
    const scope = requiredScope(r);
    const op: JsonObject = {
      operationId: operationId(r),
      tags: [r.tag],
      summary: r.summary,
      description: (r.description ? r.description + "\n\n" : "") + `Token scope: \`${scope}\`.`,
      security: [{ bearerAuth: [scope] }],
      parameters: [...parameters(r.params, "path", components), ...parameters(r.query, "query", components)],
      responses,
    };
    if (r.body) {
      op.requestBody = { required: true, content: { "application/json": { schema: toSchema(r.body, "input", components) } } };
    }
    (paths[r.path] ??= {})[r.method] = op;
  }
  const tags = [...new Set(routes.map((r) => r.tag))].map((name) => ({ name }));
  return {
    openapi: "3.1.0",
    info: {
      title: "Capstan API",
      version: API_VERSION,
      description: "Team-scoped REST API of Capstan. Every request carries `Authorization: Bearer <token>`.",
      license: { name: "Proprietary", identifier: "LicenseRef-Capstan" },
    },
    servers: [{ url: "/api/v1" }],
    tags,
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "API token; scopes read, write, deploy" },
      },
    },
  };
}
