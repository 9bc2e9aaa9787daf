import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Db } from "../db/client.js";
import { SecretBox } from "./secret-box.js";
import { ensurePrivateDir, ensurePrivateFile } from "../lib/private-files.js";

const KEY_FILE = "secret.key";
const CHECK_SETTING = "secret_key_check";
const CHECK_PLAINTEXT = "capstan-instance-key";

/**
 * The instance key comes from PLATFORM_SECRET_KEY, else from <data dir>/secret.key
 * (created on first start, mode 0600, in a 0700 data directory: lib/private-files.ts). Replicas sharing a PostgreSQL database must share
 * the key: set PLATFORM_SECRET_KEY on all of them.
 */
export function resolveInstanceKey(configured: Buffer | null, dataDir: string): Buffer {
  if (configured) return configured;
  const file = join(dataDir, KEY_FILE);
  ensurePrivateDir(dataDir);
  if (existsSync(file)) {
    ensurePrivateFile(file);
    const key = Buffer.from(readFileSync(file, "utf8").trim(), "base64");
    if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte base64 key`);
    return key;
  }
  const key = randomBytes(32);
  writeFileSync(file, key.toString("base64") + "\n", { mode: 0o600, flag: "wx" });
  return key;
}

/** Refuses to start with a key that cannot read what earlier starts encrypted. */
export async function verifyInstanceKey(db: Db, box: SecretBox): Promise<void> {
  const row = await db.instanceSetting.findUnique({ where: { key: CHECK_SETTING } });
  if (!row) {
    await db.instanceSetting.create({ data: { key: CHECK_SETTING, value: box.seal(CHECK_PLAINTEXT) } });
    return;
  }
  let ok = false;
  try {
    ok = box.open(row.value) === CHECK_PLAINTEXT;
  } catch {
    ok = false;
  }
  if (!ok) {
    throw new Error(
      "the instance secret key does not match the one this database was encrypted with " +
        "(check PLATFORM_SECRET_KEY or <data dir>/secret.key)",
    );
  }
}
