import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, mkdirSync, mkdtempSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { VolumeManifest } from "@capstan/shared";
import { readTar } from "./tar.js";
import { MANIFEST_NAME, volumeArchive, type ArchiveSource } from "./volumes.js";

async function collect(it: AsyncIterable<Buffer>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of it) out.push(c);
  return Buffer.concat(out);
}

/** A folder archived the way the engine's GET archive does it: entries named after its last segment. */
function engineLike(parent: string): ArchiveSource {
  return async (mountPath) => {
    const name = mountPath.split("/").filter(Boolean).pop()!;
    const file = join(parent, `${name}.tar`);
    execFileSync("tar", ["-C", parent, "--format=pax", "-cf", file, name]);
    return createReadStream(file);
  };
}

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe("volume archive", () => {
  it("re-packs each volume under volumes/<name>/ with a manifest of every file's size and sha256, which GNU tar extracts", async () => {
    const src = mkdtempSync(join(tmpdir(), "capstan-vol-src-"));
    mkdirSync(join(src, "data", "deep", "er"), { recursive: true });
    const big = Buffer.alloc(300_001, 9);
    const longName = `${"n".repeat(120)}.txt`;
    writeFileSync(join(src, "data", "index.html"), "hello\n");
    writeFileSync(join(src, "data", "deep", "er", longName), big);
    writeFileSync(join(src, "data", "ünïcode.txt"), "ü");
    symlinkSync("index.html", join(src, "data", "link"));
    mkdirSync(join(src, "cache"));
    writeFileSync(join(src, "cache", "c"), "");
    const lines: string[] = [];
    const archive = await collect(
      volumeArchive(
        { kind: "application", uuid: "app-1", name: "web" },
        [
          { name: "site", mount_path: "/srv/data" },
          { name: "cache", mount_path: "/var/cache/" },
        ],
        engineLike(src),
        (l) => lines.push(l),
      ),
    );

    // Read back with our reader: the manifest is last and matches every file.
    const seen = new Map<string, Buffer>();
    let manifest: VolumeManifest | null = null;
    for await (const e of readTar(Readable.from([archive]))) {
      const body = await collect(e.body);
      if (e.header.name === MANIFEST_NAME) manifest = VolumeManifest.parse(JSON.parse(body.toString()));
      else if (e.header.type === "0") seen.set(e.header.name, body);
    }
    expect(manifest).not.toBeNull();
    expect(manifest!.volumes).toEqual([
      { name: "site", mount_path: "/srv/data" },
      { name: "cache", mount_path: "/var/cache/" },
    ]);
    const byPath = new Map(manifest!.files.map((f) => [f.path, f]));
    expect(byPath.get("volumes/site/index.html")).toEqual({ path: "volumes/site/index.html", size: 6, sha256: sha(Buffer.from("hello\n")) });
    expect(byPath.get(`volumes/site/deep/er/${longName}`)).toEqual({ path: `volumes/site/deep/er/${longName}`, size: big.length, sha256: sha(big) });
    expect(byPath.get("volumes/site/ünïcode.txt")?.size).toBe(2);
    expect(byPath.get("volumes/cache/c")?.size).toBe(0);
    expect(manifest!.files).toHaveLength(seen.size);
    for (const [path, body] of seen) expect(byPath.get(path)?.sha256).toBe(sha(body));
    expect(lines).toContain("volume site (/srv/data): 3 file(s)");

    // GNU tar reads the same archive: long and non-ASCII names (pax), links, contents.
    const out = mkdtempSync(join(tmpdir(), "capstan-vol-out-"));
    writeFileSync(join(out, "a.tar"), archive);
    execFileSync("tar", ["-xf", join(out, "a.tar"), "-C", out]);
    expect(readFileSync(join(out, "volumes", "site", "deep", "er", longName)).equals(big)).toBe(true);
    expect(readFileSync(join(out, "volumes", "site", "ünïcode.txt"), "utf8")).toBe("ü");
    expect(readlinkSync(join(out, "volumes", "site", "link"))).toBe("index.html");
  });

  it("fails with the engine's reason when a volume cannot be read", async () => {
    const gen = volumeArchive({ kind: "application", uuid: "a", name: "a" }, [{ name: "x", mount_path: "/x" }], async () => {
      throw new Error("no such path /x");
    }, () => {});
    await expect(collect(gen)).rejects.toThrow(/no such path/);
  });
});
