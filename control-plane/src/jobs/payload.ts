import type { SecretBox } from "../crypto/secret-box.js";

/**
 * Job payloads at rest: sealed JSON ("v1:..." from SecretBox). Rows written before payloads
 * were sealed hold plain JSON (always an object, so they start with "{") and are still read.
 */
export function sealPayload(box: SecretBox, payload: unknown): string {
  return box.seal(JSON.stringify(payload));
}

export function openPayload(box: SecretBox, stored: string): unknown {
  if (stored.startsWith("{")) return JSON.parse(stored);
  return JSON.parse(box.open(stored));
}
