/**
 * One value of a redis.conf directive, double-quoted the way Redis (and KeyDB, its fork) splits
 * config lines (sdssplitargs): `\"` and `\\` escaped, every byte outside printable ASCII as
 * `\xHH`. A password can therefore hold any character without ending the line or the value,
 * so it cannot add directives of its own.
 */
export function redisConfValue(value: string): string {
  let out = '"';
  for (const byte of Buffer.from(value, "utf8")) {
    if (byte === 0x22 || byte === 0x5c) out += `\\${String.fromCharCode(byte)}`;
    else if (byte >= 0x20 && byte <= 0x7e) out += String.fromCharCode(byte);
    else out += `\\x${byte.toString(16).padStart(2, "0")}`;
  }
  return `${out}"`;
}

/** A redis.conf made of `directive value` lines. */
export function redisConf(directives: [name: string, value: string][]): string {
  return directives.map(([name, value]) => `${name} ${redisConfValue(value)}\n`).join("");
}
