import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";

/**
 * Dashboard passwords: scrypt from node:crypto (memory-hard, no native module to build, no
 * install script; docs/decisions.md). N=2^15, r=8, p=1: 32 MiB and ~100 ms per hash on one
 * core, OWASP's scrypt baseline. The parameters are stored with each hash, so raising them
 * later keeps old hashes verifiable (and they are re-hashed at the next sign-in).
 */
export const SCRYPT_PARAMS = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_BYTES = 32;
const SALT_BYTES = 16;
export const PASSWORD_MIN = 10;
export const PASSWORD_MAX = 1024;

function derive(password: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  // maxmem: 128*N*r bytes plus headroom; node's default (32 MiB) is just too small for N=2^15.
  const options: ScryptOptions = { ...params, maxmem: 256 * params.N * params.r };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize("NFC"), salt, KEY_BYTES, options, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, SCRYPT_PARAMS);
  const { N, r, p } = SCRYPT_PARAMS;
  return `scrypt$${N}$${r}$${p}$${salt.toString("base64")}$${key.toString("base64")}`;
}

/** A stored hash that does not parse (or has absurd parameters) verifies nothing. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/.exec(stored);
  if (!m) return false;
  const [N, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (N < 2 || N > 2 ** 20 || (N & (N - 1)) !== 0 || r < 1 || r > 32 || p < 1 || p > 16) return false;
  const expected = Buffer.from(m[5]!, "base64");
  const key = await derive(password, Buffer.from(m[4]!, "base64"), { N, r, p });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** Whether a hash was made with weaker parameters than today's. */
export function needsRehash(stored: string): boolean {
  return !stored.startsWith(`scrypt$${SCRYPT_PARAMS.N}$${SCRYPT_PARAMS.r}$${SCRYPT_PARAMS.p}$`);
}

/** A password the dashboard accepts: long enough, not absurdly long. Returns the problem, or null. */
export function passwordProblem(password: string): string | null {
  if (password.length < PASSWORD_MIN) return `Use at least ${PASSWORD_MIN} characters.`;
  if (password.length > PASSWORD_MAX) return `Use at most ${PASSWORD_MAX} characters.`;
  return null;
}
