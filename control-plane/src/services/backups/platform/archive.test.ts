import { Readable } from "node:stream";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { encryptStream } from "@capstan/shared/openpgp";
import { ArchiveWriter, readArchive, type ArchiveLine } from "./archive.js";
import { foreignKeyOrder, fromPortable, portable } from "./database.js";

function archiveLines(rows = 3): Buffer[] {
  const w = new ArchiveWriter();
  const out = [w.header({ created_at: "2026-11-27T00:00:00.000Z", source: "sqlite", migrations: ["a"] }), w.file("secret.key", Buffer.from("key\n"))];
  out.push(w.table("Team", [["id", "Int"], ["name", "String"], ["createdAt", "DateTime"]]));
  for (let i = 1; i <= rows; i++) out.push(w.row("Team", [i, `team ${i}`, "2026-11-27T00:00:00.000Z"]));
  out.push(w.end("Team"), w.manifest());
  return out;
}
const plain = (lines: Buffer[]) => gzipSync(Buffer.concat(lines));
const read = async (bytes: Buffer, passphrase: string | null = null) => {
  const seen: ArchiveLine[] = [];
  const r = await readArchive(Readable.from([bytes]), passphrase, (l) => void seen.push(l));
  return { ...r, seen };
};
async function encrypted(bytes: Buffer, passphrase: string): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const c of encryptStream(Readable.from([bytes]), passphrase)) chunks.push(c);
  return Buffer.concat(chunks);
}

describe("platform archive", () => {
  it("reads back what was written, with its manifest", async () => {
    const r = await read(plain(archiveLines()));
    expect(r.manifest.tables).toEqual({ Team: 3 });
    expect(r.seen.filter((l) => l.kind === "row")).toHaveLength(3);
    expect(r.seen.find((l) => l.kind === "file")).toMatchObject({ name: "secret.key", data: Buffer.from("key\n") });
  });

  it("refuses an altered row (sha256), a truncated archive (no manifest) and a cut gzip stream", async () => {
    const lines = archiveLines();
    lines[3] = Buffer.from(lines[3]!.toString().replace("team 1", "team X"));
    await expect(read(plain(lines))).rejects.toThrow(/sha256/);
    await expect(read(plain(archiveLines().slice(0, -1)))).rejects.toThrow(/truncated: it ends before its manifest/);
    const whole = plain(archiveLines(200));
    await expect(read(whole.subarray(0, whole.length - 20))).rejects.toThrow(/truncated|could not be read/);
  });

  it("decrypts an AEAD archive, and refuses a wrong passphrase, a missing one and a flipped byte", async () => {
    const bytes = await encrypted(plain(archiveLines()), "pass-1");
    expect((await read(bytes, "pass-1")).manifest.tables).toEqual({ Team: 3 });
    await expect(read(bytes, null)).rejects.toThrow(/encrypted: give/);
    await expect(read(bytes, "wrong")).rejects.toThrow(/passphrase|decrypt/i);
    const flipped = Buffer.from(bytes);
    flipped.writeUInt8(flipped.readUInt8(flipped.length - 40) ^ 0xff, flipped.length - 40);
    await expect(read(flipped, "pass-1")).rejects.toThrow();
  });

  it("orders tables parents first and refuses a cycle", () => {
    const t = (table: string) => ({ table, fields: [] });
    const order = foreignKeyOrder([t("Application"), t("Team"), t("Environment"), t("Project")], [
      { table: "Application", ref: "Environment" },
      { table: "Environment", ref: "Project" },
      { table: "Project", ref: "Team" },
      { table: "Application", ref: "Application" },
    ]);
    expect(order.map((x) => x.table)).toEqual(["Team", "Project", "Environment", "Application"]);
    expect(() => foreignKeyOrder([t("A"), t("B")], [{ table: "A", ref: "B" }, { table: "B", ref: "A" }])).toThrow(/cycle/);
  });

  it("turns each dialect's stored values into one portable form and back", () => {
    expect(portable("DateTime", "2026-11-27 03:48:36.123")).toBe("2026-11-27T03:48:36.123Z");
    expect(portable("DateTime", "2026-11-27T03:48:36.123Z")).toBe("2026-11-27T03:48:36.123Z");
    expect(portable("Boolean", 1n)).toBe(true);
    expect(portable("Boolean", 0n)).toBe(false);
    expect(portable("BigInt", 9007199254740993n)).toBe("9007199254740993");
    expect(portable("Int", 7n)).toBe(7);
    expect(fromPortable("BigInt", "9007199254740993")).toBe(9007199254740993n);
    expect(fromPortable("DateTime", "2026-11-27T03:48:36.123Z")).toEqual(new Date("2026-11-27T03:48:36.123Z"));
    expect(() => fromPortable("Int", "1")).toThrow(/not an integer/);
  });
});
