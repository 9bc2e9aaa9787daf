import { createWriteStream } from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { CONFIGURATION_FILE, VolumeManifest } from "@capstan/shared";
import { readConfigurationEntry } from "./configuration.js";
import { decryptStream, looksLikeGzip, looksLikeOpenPgp } from "./crypto.js";
import { BackupToolError } from "./exec.js";
import { peek } from "./restore.js";
import { TAR_END, entryHeaders, readTar } from "./tar.js";
import { MANIFEST_NAME, VOLUMES_DIR, regularEntry } from "./volumes.js";

// ---- resource restores (issue 19, w7/restore): the check half of a volume restore (volume-restore.ts runs it) ----

/**
 * A stored volume backup (gzip, or OpenPGP AEAD around gzip) as its tar stream. A wrong
 * passphrase or a file that is neither fails here; damage later in the file fails the stream
 * (AEAD chunk tags, the gzip CRC at the end).
 */
export async function openVolumeArchive(source: Readable, passphrase: string | null): Promise<Readable> {
  const { head, rest } = await peek(source, 2);
  let stage: Readable;
  if (looksLikeGzip(head)) stage = rest;
  else if (looksLikeOpenPgp(head)) {
    if (!passphrase) throw new BackupToolError("the backup is OpenPGP-encrypted and no passphrase was given");
    stage = await decryptStream(rest, passphrase);
  } else throw new BackupToolError("the file is not a Capstan volume backup (neither gzip nor OpenPGP)");
  const gunzip = createGunzip();
  stage.on("error", (err) => gunzip.destroy(err));
  stage.pipe(gunzip);
  return gunzip;
}

export interface StagedVolumes {
  manifest: VolumeManifest;
  /** regular files checked against the manifest */
  files: number;
  bytes: number;
  /** (w8/rbconfig) the archive's configuration.json (checked against the manifest, not staged), null without one */
  configuration: string | null;
}

/**
 * Reads a volume archive to its end and writes its volume entries (not the manifest) to
 * `stagingFile`, a tar on the agent's disk, checking every regular file against the manifest
 * (the archive's last entry): same set of paths, sizes and sha256. Only when this resolves is
 * the staged tar fit to replace the volumes' contents; any damage (a tampered or truncated
 * archive, a file the manifest does not list, a volume the restore does not expect) rejects with
 * the reason, and the caller discards the staging file. Memory holds the hashes, one per file.
 */
export async function stageVolumeArchive(tar: Readable, expectedVolumes: string[], stagingFile: string): Promise<StagedVolumes> {
  const seen = new Map<string, { size: number; sha256: string }>();
  let manifest: VolumeManifest | null = null;
  let configuration: string | null = null;
  let bytes = 0;
  const volumeOf = (name: string) => (name.startsWith(`${VOLUMES_DIR}/`) ? name.slice(VOLUMES_DIR.length + 1).split("/")[0]! : null);
  const entries = async function* (): AsyncGenerator<Buffer> {
    for await (const { header, body } of readTar(tar)) {
      if (manifest) throw new BackupToolError(`the archive has an entry after its manifest (${JSON.stringify(header.name)})`);
      if (header.name === MANIFEST_NAME) {
        const chunks: Buffer[] = [];
        let size = 0;
        for await (const c of body) {
          size += c.length;
          if (size > 256 * 1024 * 1024) throw new BackupToolError("the archive's manifest is too large");
          chunks.push(c);
        }
        let parsed;
        try {
          parsed = VolumeManifest.safeParse(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        } catch (err) {
          throw new BackupToolError(`the archive's manifest is not JSON: ${(err as Error).message}`);
        }
        if (!parsed.success) throw new BackupToolError("the archive's manifest is not a Capstan volume manifest");
        manifest = parsed.data;
        continue;
      }
      const name = header.name.replace(/\/+$/, "");
      // (w8/rbconfig) the configuration document: read (bounded) and hashed, not staged.
      if (name === CONFIGURATION_FILE && (header.type === "0" || header.type === "\0") && configuration === null) {
        const got = await readConfigurationEntry(body);
        seen.set(name, { size: got.size, sha256: got.sha256 });
        configuration = got.text;
        continue;
      }
      const volume = volumeOf(name);
      if (volume === null || name.split("/").includes("..")) throw new BackupToolError(`the archive has an entry outside its volumes: ${JSON.stringify(header.name)}`);
      if (!expectedVolumes.includes(volume)) throw new BackupToolError(`the archive has a volume this resource does not have: ${volume}`);
      if (header.type === "0" || header.type === "\0" || header.type === "7") {
        const got = yield* regularEntry({ name, size: header.size, mode: header.mode, uid: header.uid, gid: header.gid, mtime: header.mtime ?? 0 }, body);
        seen.set(name, { size: got.size, sha256: got.sha256 });
        bytes += got.size;
      } else if (header.type === "5" || header.type === "2" || header.type === "1") {
        for (const b of entryHeaders({ name: header.type === "5" ? `${name}/` : name, type: header.type, size: 0, mode: header.mode, uid: header.uid, gid: header.gid, mtime: header.mtime ?? 0, linkname: header.linkname ?? "" })) yield b;
      } else throw new BackupToolError(`the archive has an entry of an unexpected type ${JSON.stringify(header.type)}: ${JSON.stringify(header.name)}`);
    }
    yield TAR_END;
  };
  try {
    await pipeline(Readable.from(entries()), createWriteStream(stagingFile, { mode: 0o600 }));
  } catch (err) {
    if (err instanceof BackupToolError) throw err;
    throw new BackupToolError(`the backup is damaged or truncated: ${(err as Error).message}`);
  }
  // The end of the tar is not the end of the file: the gzip trailer (CRC, size) and the last AEAD tag follow.
  try {
    for await (const _ of tar);
  } catch (err) {
    throw new BackupToolError(`the backup is damaged or truncated at its end: ${(err as Error).message}`);
  }
  const m = manifest as VolumeManifest | null;
  if (!m) throw new BackupToolError("the archive ends before its manifest: it is truncated");
  const listed = new Map(m.files.map((f) => [f.path, f]));
  for (const [path, got] of seen) {
    const want = listed.get(path);
    if (!want) throw new BackupToolError(`${path} is in the archive but not in its manifest`);
    if (want.size !== got.size) throw new BackupToolError(`${path} has ${got.size} bytes, the manifest says ${want.size}`);
    if (want.sha256 !== got.sha256) throw new BackupToolError(`${path} does not match its sha256 in the manifest`);
  }
  for (const path of listed.keys()) if (!seen.has(path)) throw new BackupToolError(`${path} is in the manifest but not in the archive: it is truncated`);
  const configurationFiles = configuration === null ? 0 : 1;
  return { manifest: m, files: seen.size - configurationFiles, bytes, configuration };
}
