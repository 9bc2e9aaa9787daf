import { Readable } from "node:stream";
import { finished, pipeline } from "node:stream/promises";
import { describe, expect, it } from "vitest";
import { ExecDemux } from "./exec-demux.js";

const frame = (type: number, payload: Buffer) => {
  const h = Buffer.alloc(8);
  h[0] = type;
  h.writeUInt32BE(payload.length, 4);
  return Buffer.concat([h, payload]);
};

describe("ExecDemux", () => {
  it("splits stdout from stderr across arbitrary chunk boundaries", async () => {
    const wire = Buffer.concat([frame(1, Buffer.from("hello ")), frame(2, Buffer.from("warn\n")), frame(1, Buffer.from("world")), frame(2, Buffer.from("error: x\n"))]);
    // one byte at a time: headers and payloads split everywhere
    const demux = new ExecDemux();
    const out: Buffer[] = [];
    demux.stdout.on("data", (c: Buffer) => out.push(c));
    await pipeline(Readable.from([...wire].map((b) => Buffer.from([b]))), demux);
    await finished(demux.stdout);
    expect(Buffer.concat(out).toString()).toBe("hello world");
    expect(demux.stderr()).toBe("warn\nerror: x\n");
  });

  it("keeps only the newest stderr bytes", async () => {
    const demux = new ExecDemux(10);
    demux.stdout.resume();
    await pipeline(Readable.from([frame(2, Buffer.from("0123456789")), frame(2, Buffer.from("abcdef"))]), demux);
    expect(demux.stderr()).toBe("…6789abcdef");
  });

  it("holds the writer back until stdout is read (backpressure)", async () => {
    const demux = new ExecDemux();
    const big = frame(1, Buffer.alloc(1024 * 1024));
    let acked = 0;
    for (let i = 0; i < 8; i++) demux.write(big, () => acked++);
    await new Promise((r) => setTimeout(r, 50));
    // Nothing reads stdout: only what fits its buffer was acknowledged.
    expect(acked).toBeLessThan(2);
    let read = 0;
    demux.stdout.on("data", (c: Buffer) => (read += c.length));
    await new Promise((r) => setTimeout(r, 100));
    expect(acked).toBe(8);
    expect(read).toBe(8 * 1024 * 1024);
  });
});
