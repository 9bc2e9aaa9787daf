import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { firstFile, readTar, singleFileTarStream } from "./tar.js";

async function collect(it: AsyncIterable<Buffer>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of it) out.push(c);
  return Buffer.concat(out);
}

describe("tar", () => {
  it("writes an archive GNU tar extracts, with the owner and mode given", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-tar-"));
    const body = Buffer.alloc(70_001, 7);
    const tar = await collect(singleFileTarStream("dump.rdb", body.length, Readable.from([body.subarray(0, 1000), body.subarray(1000)]), { mode: 0o600, uid: 999, gid: 998 }));
    writeFileSync(join(dir, "a.tar"), tar);
    expect(execFileSync("tar", ["-tvf", join(dir, "a.tar"), "--numeric-owner"]).toString()).toMatch(/^-rw------- 999\/998 +70001 .* dump\.rdb\n$/);
    execFileSync("tar", ["-xf", join(dir, "a.tar"), "-C", dir]);
    expect(readFileSync(join(dir, "dump.rdb")).equals(body)).toBe(true);
  });

  it("writes owner ids above octal's seven digits in base-256, which GNU tar reads back", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-tar-"));
    const tar = await collect(singleFileTarStream("f", 3, Readable.from([Buffer.from("abc")]), { uid: 100_000_000, gid: 2_097_152 }));
    writeFileSync(join(dir, "a.tar"), tar);
    expect(execFileSync("tar", ["-tvf", join(dir, "a.tar"), "--numeric-owner"]).toString()).toMatch(/^-rw------- 100000000\/2097152 +3 .* f\n$/);
    await expect(collect(singleFileTarStream("f", 0, Readable.from([]), { uid: -1 }))).rejects.toThrow(/unsupported owner id -1/);
  });

  it("refuses a body whose size differs from the header's", async () => {
    await expect(collect(singleFileTarStream("x", 10, Readable.from([Buffer.alloc(9)])))).rejects.toThrow(/9 bytes, 10 expected/);
    await expect(collect(singleFileTarStream("x", 10, Readable.from([Buffer.alloc(11)])))).rejects.toThrow(/grew/);
  });

  it("reads GNU tar's archives entry by entry, long names (pax) included", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-tar-"));
    const long = `${"n".repeat(150)}.bin`;
    writeFileSync(join(dir, long), Buffer.alloc(1234, 1));
    writeFileSync(join(dir, "small"), "hello");
    execFileSync("tar", ["--format=pax", "-cf", join(dir, "b.tar"), "-C", dir, long, "small"]);
    const seen: [string, number, string][] = [];
    for await (const e of readTar(Readable.from([readFileSync(join(dir, "b.tar"))]))) {
      const data = await collect(e.body);
      seen.push([e.header.name, data.length, data.subarray(0, 5).toString("latin1")]);
    }
    expect(seen).toEqual([
      [long, 1234, "\x01\x01\x01\x01\x01"],
      ["small", 5, "hello"],
    ]);
    // A consumer may skip a body; the next entry is still found.
    const first = await firstFile(Readable.from([readFileSync(join(dir, "b.tar"))]));
    expect(first?.header.name).toBe(long);
  });

  it("fails on a truncated archive instead of returning less", async () => {
    const tar = await collect(singleFileTarStream("f", 5000, Readable.from([Buffer.alloc(5000)])));
    const cut = tar.subarray(0, 2000);
    const entry = await firstFile(Readable.from([cut]));
    await expect(collect(entry!.body)).rejects.toThrow(/ends inside f/);
  });
});
