import { open, readFile, readdir, realpath, stat } from "node:fs/promises";
import { isAbsolute, join, relative, sep } from "node:path";
import { BuildPlanError } from "./errors.js";

/** Manifests are small; anything bigger is not one, and reading it whole would only cost memory. */
const MAX_READ_BYTES = 1024 * 1024;

export type EntryKind = "file" | "dir";

/**
 * Read-only view of a checked-out source tree. The repository is untrusted: a symbolic link
 * may point anywhere on the agent's host, so every path is resolved and must stay inside.
 */
export class SourceTree {
  private rootReal: Promise<string>;

  constructor(readonly root: string) {
    this.rootReal = realpath(root).catch(() => {
      throw new BuildPlanError("the source directory does not exist (check the base directory)");
    });
  }

  /** "file", "dir", or null when absent or a link leading outside the tree. */
  async kind(rel: string): Promise<EntryKind | null> {
    const abs = await this.resolve(rel);
    if (!abs) return null;
    const st = await stat(abs).catch(() => null);
    if (!st) return null;
    if (st.isFile()) return "file";
    if (st.isDirectory()) return "dir";
    return null;
  }

  async isFile(rel: string): Promise<boolean> {
    return (await this.kind(rel)) === "file";
  }

  async isDir(rel: string): Promise<boolean> {
    return (await this.kind(rel)) === "dir";
  }

  /** The file's text, or null when it is absent. */
  async read(rel: string): Promise<string | null> {
    const abs = await this.resolve(rel);
    if (!abs) return null;
    const st = await stat(abs).catch(() => null);
    if (!st?.isFile()) return null;
    if (st.size > MAX_READ_BYTES) throw new BuildPlanError(`${rel} is larger than 1 MiB`);
    return readFile(abs, "utf8");
  }

  /** The first `bytes` of a file (enough for a package clause or an assignment near the top), or null. */
  async head(rel: string, bytes = 64 * 1024): Promise<string | null> {
    const abs = await this.resolve(rel);
    if (!abs) return null;
    const fh = await open(abs, "r").catch(() => null);
    if (!fh) return null;
    try {
      if (!(await fh.stat()).isFile()) return null;
      const buf = Buffer.alloc(bytes);
      const { bytesRead } = await fh.read(buf, 0, bytes, 0);
      return buf.subarray(0, bytesRead).toString("utf8");
    } finally {
      await fh.close();
    }
  }

  /** Entries of a directory inside the tree (links resolved the same way), sorted by name. */
  async list(rel: string): Promise<{ name: string; kind: EntryKind }[]> {
    const abs = await this.resolve(rel);
    if (!abs) return [];
    const names = await readdir(abs).catch(() => [] as string[]);
    const out: { name: string; kind: EntryKind }[] = [];
    for (const name of names.sort()) {
      const kind = await this.kind(rel === "." ? name : `${rel}/${name}`);
      if (kind) out.push({ name, kind });
    }
    return out;
  }

  private async resolve(rel: string): Promise<string | null> {
    if (isAbsolute(rel) || rel.split("/").includes("..")) throw new Error(`not a relative path: ${rel}`);
    const root = await this.rootReal;
    // realpath resolves every component, so a linked directory on the way is caught too.
    const target = await realpath(join(root, rel)).catch(() => null);
    if (!target) return null;
    const inside = relative(root, target);
    return inside === "" || (!inside.startsWith(`..${sep}`) && inside !== ".." && !isAbsolute(inside)) ? target : null;
  }
}
