import { z } from "zod";

/** Error body of every non-2xx response (spec section 7). */
export const ErrorBody = z
  .object({
    message: z.string(),
    errors: z.record(z.string(), z.array(z.string())).optional(),
  })
  .meta({ id: "Error" });
export type ErrorBody = z.infer<typeof ErrorBody>;

export const MessageBody = z.object({ message: z.string() }).meta({ id: "Message" });

export const Timestamp = z.string().meta({ format: "date-time", description: "ISO 8601, UTC" });

export const TOKEN_SCOPES = ["read", "write", "deploy"] as const;
export const TokenScope = z.enum(TOKEN_SCOPES);
export type TokenScope = z.infer<typeof TokenScope>;

export const TEAM_ROLES = ["owner", "admin", "member", "viewer"] as const;
export const TeamRole = z.enum(TEAM_ROLES);
export type TeamRole = z.infer<typeof TeamRole>;

export const PERMISSION_LEVELS = ["view_only", "deploy", "full_access"] as const;
export const PermissionLevel = z.enum(PERMISSION_LEVELS);
export type PermissionLevel = z.infer<typeof PermissionLevel>;

/** Boolean query parameters: true/false or 1/0. */
export const QueryBoolean = z
  .enum(["true", "false", "1", "0"])
  .transform((v) => v === "true" || v === "1")
  .meta({ description: "true/false (or 1/0)" });

export const MAX_PER_PAGE = 100;
export const DEFAULT_PER_PAGE = 15;

/** page/per_page on every list endpoint; absent means "everything" (spec section 8). */
export const PaginationQuery = z.object({
  page: z.coerce.number().int().min(1).optional(),
  per_page: z.coerce.number().int().min(1).max(MAX_PER_PAGE).optional(),
});
export type PaginationQuery = z.infer<typeof PaginationQuery>;

export const PageMeta = z
  .object({
    current_page: z.number().int(),
    per_page: z.number().int(),
    total: z.number().int(),
    last_page: z.number().int(),
  })
  .meta({ id: "PageMeta", description: "Present only when page or per_page was given." });

export function listOf<T extends z.ZodType>(item: T) {
  return z.object({ data: z.array(item), meta: PageMeta.optional() });
}

/** Marks a path parameter as the id of a team-owned resource of the given kind. */
export function resourceId<T extends z.ZodType>(kind: string, schema: T): T {
  return schema.meta({ "x-capstan-resource": kind }) as T;
}

export const Uuid = z.string().min(1).max(64);

/**
 * Options of z.strictObject for request bodies: a field the endpoint does not take is a 422
 * naming it. Silently ignoring it would hide a misspelt secret or setting (an S3 storage's
 * `encryption_pasphrase` would leave its backups unencrypted without a word).
 */
export const unknownFieldsRefused = {
  error: (issue: { code?: string; keys?: string[] }) =>
    issue.code === "unrecognized_keys" ? `Unknown field(s): ${(issue.keys ?? []).join(", ")}. This path does not take them.` : undefined,
};

/**
 * THE way to build a request body, and every object inside one: a strict object, so a field
 * the path does not take is a 422 naming it (one rule for all routes, issue 15). Fields a route
 * accepts only for compatibility with other clients, and ignores, are not part of the body:
 * the route table lists them (`compatibleFields` of a RouteSpec, docs/compatibility.md). The
 * HTTP edge refuses to start with a route whose body has an object not built this way.
 */
export function requestBody<T extends z.core.$ZodLooseShape>(shape: T) {
  return z.strictObject(shape, unknownFieldsRefused);
}

/** Where a schema has an object that lets unknown fields through (not built with requestBody): dotted paths, "" for the top. */
export function looseObjects(schema: z.ZodType): string[] {
  const out: string[] = [];
  const seen = new Set<unknown>();
  const walk = (s: z.ZodType | undefined, path: string) => {
    if (!s || seen.has(s)) return;
    seen.add(s);
    const def = (s as unknown as { _zod: { def: Record<string, any> } })._zod.def;
    switch (def.type) {
      case "object": {
        const catchall = def.catchall as z.ZodType | undefined;
        const strict = catchall !== undefined && (catchall as unknown as { _zod: { def: { type: string } } })._zod.def.type === "never";
        if (!strict) out.push(path);
        for (const [k, v] of Object.entries(def.shape as Record<string, z.ZodType>)) walk(v, path ? `${path}.${k}` : k);
        return;
      }
      case "array":
        return walk(def.element, `${path}[]`);
      case "record":
        return walk(def.valueType, `${path}.*`);
      case "union":
        for (const o of def.options as z.ZodType[]) walk(o, path);
        return;
      case "intersection":
        walk(def.left, path);
        return walk(def.right, path);
      case "pipe":
        walk(def.in, path);
        return walk(def.out, path);
      case "lazy":
        return walk(def.getter(), path);
      case "optional":
      case "nullable":
      case "default":
      case "prefault":
      case "nonoptional":
      case "readonly":
      case "catch":
        return walk(def.innerType, path);
    }
  };
  walk(schema, "");
  return out;
}
/** The largest row id: ids are int4 on PostgreSQL, so a larger number names no row (and must not reach a query). */
export const MAX_ROW_ID = 2_147_483_647;
/** An integer id in a JSON body: a number (no coercion) in the range of the database's ids. */
export const BodyId = z.number().int().min(1).max(MAX_ROW_ID);
/** Integer ids in paths and queries: canonical decimal digits only (no "0x1", "1e3", " 1" or "1.0"). */
export const IntId = z.coerce
  .string()
  .regex(/^[0-9]+$/, "Must be a positive integer.")
  .transform(Number)
  .pipe(BodyId);

/** Lowercase letters, digits and single hyphens; the spec's environment name rule. */
export const SLUG_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
