import { Readable } from "node:stream";
import { readTar, TAR_END, tarHeader, tarPadding } from "../backup/tar.js";
import type { Engine } from "../docker/engine.js";

/** Numeric owner of a file inside a container. */
export interface FileOwner {
  uid: number;
  gid: number;
}

/**
 * Writes a small file holding a secret into a container (created, running or stopped) through
 * the engine's archive API: mode 600 and owned by `owner`, so that exactly the process that must
 * read it can (the engine's own putFile makes root-owned files, which a server or tool that runs
 * as another user cannot open). `name` may have one leading directory ("capstan-x/pgpass"): the
 * engine creates a missing parent as root, mode 755, so no other user can add files beside it.
 */
export async function putPrivateFile(engine: Engine, container: string, dir: string, name: string, content: Buffer, owner: FileOwner, signal: AbortSignal): Promise<void> {
  const tar = Buffer.concat([tarHeader(name, content.length, { mode: 0o600, uid: owner.uid, gid: owner.gid }), content, tarPadding(content.length), TAR_END]);
  await engine.putArchive(container, dir, Readable.from([tar]), signal);
}

/** Frees the engine connection behind an archive stream that is not read to its end. */
export function releaseArchive(archive: NodeJS.ReadableStream): void {
  (archive as unknown as { destroy?: () => void }).destroy?.();
}

/**
 * The owner of a directory of a container: the first entry of its archive. The rest of the
 * archive (the whole directory) is never read; the stream is closed at once.
 */
export async function dirOwner(engine: Engine, container: string, dir: string, signal: AbortSignal): Promise<FileOwner> {
  const archive = await engine.getArchive(container, dir, signal);
  try {
    for await (const entry of readTar(archive as AsyncIterable<Buffer>)) return { uid: entry.header.uid, gid: entry.header.gid };
  } finally {
    releaseArchive(archive);
  }
  throw new Error(`cannot read the owner of ${dir}: its archive is empty`);
}
