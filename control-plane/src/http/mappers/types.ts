import type { z } from "zod";

/**
 * What a mapper returns: the shape the response schema (shared/src/api) accepts, as the route
 * table's response validation and the OpenAPI document see it. Every REST body of a resource
 * is built by its one mapper in this folder, typed against its shared schema, so a field the
 * schema gains or renames fails to compile here rather than at a client.
 */
export type Out<S extends z.ZodType> = z.input<S>;
