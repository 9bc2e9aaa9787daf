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
/** Integer ids in paths and queries: canonical decimal digits only (no "0x1", "1e3", " 1" or "1.0"). */
export const IntId = z.coerce
  .string()
  .regex(/^[0-9]+$/, "Must be a positive integer.")
  .transform(Number)
  .pipe(z.number().int().min(1).max(2_147_483_647));

/** Lowercase letters, digits and single hyphens; the spec's environment name rule. */
export const SLUG_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
