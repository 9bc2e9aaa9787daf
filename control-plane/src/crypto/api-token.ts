import { createHash, randomBytes } from "node:crypto";

/**
 * API tokens are "cap_" + 40 base62 characters (~238 bits). Only the SHA-256 of the token
 * is stored: with that much entropy a fast hash is safe, and lookups stay one index probe.
 */
const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
export const TOKEN_PREFIX = "cap_";
const TOKEN_PATTERN = /^cap_[0-9A-Za-z]{40}$/;

export function generateApiToken(): string {
  const bytes = randomBytes(64);
  let out = "";
  for (const b of bytes) {
    if (b < 248) out += ALPHABET[b % 62]; // 248 = 4*62: rejects the biased tail
    if (out.length === 40) break;
  }
  if (out.length < 40) return generateApiToken();
  return TOKEN_PREFIX + out;
}

export function hashApiToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export function looksLikeApiToken(value: string): boolean {
  return TOKEN_PATTERN.test(value);
}
