import { randomUUID } from "node:crypto";

/** Public identifiers of resources: UUID v4 strings, as the spec's "string uuid". */
export function newUuid(): string {
  return randomUUID();
}
