/**
 * Masking of known secret values in text that leaves for users (job progress lines, errors,
 * container logs): the agent masks before it sends, the control plane masks again what it
 * passes on. One implementation for both ends.
 */
export const MASK = "********";
/** Shorter values would mask ordinary words ("true", "1") and say nothing secret. */
export const MIN_SECRET_LENGTH = 4;

export type Masker = (text: string) => string;

/**
 * Replaces every occurrence of each secret value with ********. Longer values first, so a
 * secret that contains another is masked whole. Multi-line values are also masked line by
 * line, because output is masked one line at a time.
 */
export function createMasker(secrets: Iterable<string>): Masker {
  const values = new Set<string>();
  for (const s of secrets) {
    for (const v of [s, ...s.split(/\r?\n/)]) {
      const t = v.trim();
      if (v.length >= MIN_SECRET_LENGTH) values.add(v);
      if (t.length >= MIN_SECRET_LENGTH) values.add(t);
    }
  }
  const sorted = [...values].sort((a, b) => b.length - a.length);
  if (sorted.length === 0) return (text) => text;
  return (text) => {
    let out = text;
    for (const v of sorted) if (out.includes(v)) out = out.split(v).join(MASK);
    return out;
  };
}

/** The error with its message masked; the same object, so its class still tells what failed. */
export function maskError(err: unknown, mask: Masker): Error {
  if (err instanceof Error) {
    err.message = mask(err.message);
    return err;
  }
  return new Error(mask(String(err)));
}
