import { createHash } from "node:crypto";
import { ResourceConfiguration, CONFIGURATION_FILE, CONFIGURATION_MAX_BYTES, type VolumeManifest } from "@capstan/shared";
import { BackupToolError } from "./exec.js";
import { entryHeaders, tarPadding } from "./tar.js";

// ---- configuration and full resource backups (issue 19, w8/rbconfig) ----

/**
 * The configuration document as the archive's `configuration.json` (a regular file of the tar,
 * hashed like every volume file): its manifest line. The document is the control
 * plane's JSON text, written as it came (its env values are sealed with the instance key).
 */
export async function* configurationEntry(text: string): AsyncGenerator<Buffer, VolumeManifest["files"][number]> {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length > CONFIGURATION_MAX_BYTES) throw new BackupToolError(`the configuration document has ${bytes.length} bytes, more than ${CONFIGURATION_MAX_BYTES}`);
  for (const b of entryHeaders({ name: CONFIGURATION_FILE, type: "0", size: bytes.length, mode: 0o600, uid: 0, gid: 0, mtime: Math.floor(Date.now() / 1000) })) yield b;
  yield bytes;
  yield tarPadding(bytes.length);
  return { path: CONFIGURATION_FILE, size: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") };
}

/** Reads the archive's configuration.json (at most CONFIGURATION_MAX_BYTES): its text, size and sha256 for the manifest check. */
export async function readConfigurationEntry(body: AsyncIterable<Buffer>): Promise<{ text: string; size: number; sha256: string }> {
  const chunks: Buffer[] = [];
  const hash = createHash("sha256");
  let size = 0;
  for await (const c of body) {
    size += c.length;
    if (size > CONFIGURATION_MAX_BYTES) throw new BackupToolError(`the archive's ${CONFIGURATION_FILE} is larger than ${CONFIGURATION_MAX_BYTES} bytes`);
    hash.update(c);
    chunks.push(c);
  }
  return { text: Buffer.concat(chunks).toString("utf8"), size, sha256: hash.digest("hex") };
}

/**
 * Checks a restored document against the shared schema (the control plane checks it again before
 * applying it): a document this version cannot read fails the restore before anything is stopped.
 */
export function checkConfiguration(text: string | null): string {
  if (text === null) throw new BackupToolError(`the archive has no ${CONFIGURATION_FILE}: it is not a configuration or full backup`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new BackupToolError(`the archive's ${CONFIGURATION_FILE} is not JSON: ${(err as Error).message}`);
  }
  const r = ResourceConfiguration.safeParse(parsed);
  if (!r.success) {
    const first = r.error.issues[0];
    throw new BackupToolError(`the archive's ${CONFIGURATION_FILE} is not a configuration document this agent reads (${first ? `${first.path.join(".")}: ${first.message}` : "invalid"})`);
  }
  return text;
}
