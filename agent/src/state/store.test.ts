import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeFileAtomic } from "./atomic.js";
import { outcomeFileKey, sha256, StateStore } from "./store.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "capstan-agent-state-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const ok = (id: string, attempt = 1) => ({ id, attempt, ok: true as const, result: { n: 1 } });

describe("writeFileAtomic", () => {
  it("replaces the file whole, mode 0600, and leaves no temp file", async () => {
    const f = join(dir, "a.json");
    await writeFileAtomic(f, "one");
    await writeFileAtomic(f, "two");
    expect(await readFile(f, "utf8")).toBe("two");
    expect((await stat(f)).mode & 0o777).toBe(0o600);
    expect(await readdir(dir)).toEqual(["a.json"]);
  });
});

describe("StateStore outcomes", () => {
  it("persists outcomes across a restart; unacked ones are pending", async () => {
    const a = await StateStore.open(dir);
    await a.putOutcome(ok("job-1"));
    await a.putOutcome({ id: "job-2", attempt: 2, ok: false, error: "boom" });
    await a.markAcked("job-1", 1);
    await a.flush();

    const b = await StateStore.open(dir);
    expect(b.getOutcome("job-1")).toMatchObject({ acked: true, outcome: ok("job-1") });
    expect(b.pending().map((p) => p.outcome)).toEqual([{ id: "job-2", attempt: 2, ok: false, error: "boom" }]);
    const files = await readdir(join(dir, "outcomes"));
    expect(files.sort()).toEqual(["job-1.json", "job-2.json"]);
    const onDisk = JSON.parse(await readFile(join(dir, "outcomes", "job-2.json"), "utf8"));
    expect(onDisk).toMatchObject({ v: 1, acked: false, acked_at: null, outcome: { id: "job-2" } });
  });

  it("updates the index synchronously (a redelivery during the write finds it)", async () => {
    const s = await StateStore.open(dir);
    const p = s.putOutcome(ok("j"));
    expect(s.getOutcome("j")?.outcome).toEqual(ok("j"));
    await p;
  });

  it("an ack for an older attempt does not silence the re-send for the newer one", async () => {
    const s = await StateStore.open(dir);
    await s.putOutcome(ok("j", 1));
    await s.putOutcome(ok("j", 2)); // redelivered as attempt 2
    expect(await s.markAcked("j", 1)).toBe(false);
    expect(s.pending()).toHaveLength(1);
    expect(await s.markAcked("j", 2)).toBe(true);
    expect(s.pending()).toHaveLength(0);
    expect(await s.markAcked("j", 2)).toBe(false); // already acked
  });

  it("keeps only the newest acked outcomes, never an unacked one", async () => {
    let t = Date.parse("2026-01-01T00:00:00Z");
    const s = await StateStore.open(dir, { keepAcked: 3, now: () => new Date((t += 1000)) });
    for (let i = 0; i < 6; i++) {
      await s.putOutcome(ok(`j${i}`));
      if (i !== 1) await s.markAcked(`j${i}`, 1);
    }
    await s.flush();
    const ids = [...(await readdir(join(dir, "outcomes")))].map((f) => f.replace(/\.json$/, "")).sort();
    expect(ids).toEqual(["j1", "j3", "j4", "j5"]);
    expect(s.size()).toBe(4);
    const again = await StateStore.open(dir, { keepAcked: 3 });
    expect(again.getOutcome("j0")).toBeUndefined();
    expect(again.getOutcome("j1")?.acked).toBe(false);
  });

  it("stores ids that are not file-name safe under a hash", async () => {
    const id = "../../etc/passwd";
    expect(outcomeFileKey(id)).toBe("~" + sha256(id));
    expect(outcomeFileKey("abc-DEF_1")).toBe("abc-DEF_1");
    const s = await StateStore.open(dir);
    await s.putOutcome(ok(id));
    expect(await readdir(join(dir, "outcomes"))).toEqual([`~${sha256(id)}.json`]);
    expect((await StateStore.open(dir)).getOutcome(id)?.outcome.id).toBe(id);
  });

  it("ignores torn temp files and unreadable files at load", async () => {
    const s = await StateStore.open(dir);
    await s.putOutcome(ok("good"));
    await writeFile(join(dir, "outcomes", ".good.json.123.abcd.tmp"), "{half");
    await writeFile(join(dir, "outcomes", "bad.json"), "not json");
    await writeFile(join(dir, "outcomes", "other.json"), JSON.stringify({ v: 1, outcome: ok("mismatch"), acked: false, finished_at: "x", acked_at: null }));
    const again = await StateStore.open(dir);
    expect(again.size()).toBe(1);
    expect(again.getOutcome("good")).toBeDefined();
    expect((await readdir(join(dir, "outcomes"))).includes(".good.json.123.abcd.tmp")).toBe(false);
  });
});

describe("StateStore stand-down marker", () => {
  it("refuses the same token, and a new token clears it", async () => {
    const s = await StateStore.open(dir);
    expect(s.standDownMarker()).toBeNull();
    await s.writeStandDown("token-aaaaaaaaaaaaaaaa", "server deleted");
    const raw = await readFile(join(dir, "stood-down.json"), "utf8");
    expect(raw).not.toContain("token-aaaaaaaaaaaaaaaa"); // only its hash
    const again = await StateStore.open(dir);
    expect(again.standDownMarker()?.reason).toBe("server deleted");
    expect(again.isStoodDown("token-aaaaaaaaaaaaaaaa")).toBe(true);
    expect(again.isStoodDown("token-bbbbbbbbbbbbbbbb")).toBe(false);
    await again.clearStandDown();
    expect((await StateStore.open(dir)).standDownMarker()).toBeNull();
  });
});

describe("StateStore proxy name", () => {
  it("keeps the last proxy name across a restart; the same name again writes nothing", async () => {
    const a = await StateStore.open(dir);
    expect(a.proxyName()).toBeNull();
    await a.writeProxyName("capstan-proxy-a");
    await a.writeProxyName("capstan-proxy-b");
    await a.flush();
    expect(JSON.parse(await readFile(join(dir, "proxy.json"), "utf8"))).toEqual({ v: 1, name: "capstan-proxy-b" });
    const before = (await stat(join(dir, "proxy.json"))).mtimeMs;
    await a.writeProxyName("capstan-proxy-b");
    expect((await stat(join(dir, "proxy.json"))).mtimeMs).toBe(before);

    const b = await StateStore.open(dir);
    expect(b.proxyName()).toBe("capstan-proxy-b");
  });

  it("ignores a proxy file it cannot read or whose name is not a container name", async () => {
    await writeFile(join(dir, "proxy.json"), JSON.stringify({ v: 1, name: "../etc/passwd" }));
    expect((await StateStore.open(dir)).proxyName()).toBeNull();
    await writeFile(join(dir, "proxy.json"), "{not json");
    expect((await StateStore.open(dir)).proxyName()).toBeNull();
  });

  it("refuses to record a name that is not a container name", async () => {
    const a = await StateStore.open(dir);
    await expect(a.writeProxyName("a b")).rejects.toThrow();
    expect(a.proxyName()).toBeNull();
  });
});
