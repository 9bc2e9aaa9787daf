import { createHash, randomBytes } from "node:crypto";

/** Agent tokens: "capa_" + 48 hex chars (192 bits); stored as SHA-256 like API tokens. */
export const AGENT_TOKEN_PATTERN = /^capa_[0-9a-f]{48}$/;

export function generateAgentToken(): string {
  return "capa_" + randomBytes(24).toString("hex");
}

export function hashAgentToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}
