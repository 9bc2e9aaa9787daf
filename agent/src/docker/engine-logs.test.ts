import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { readLogFrames } from "./streams.js";

const frame = (stream: 1 | 2, text: string) => {
  const body = Buffer.from(text);
  const head = Buffer.alloc(8);
  head.writeUInt8(stream, 0);
  head.writeUInt32BE(body.length, 4);
  return Buffer.concat([head, body]);
};

function feed(chunks: Buffer[]): PassThrough {
  const s = new PassThrough();
  setImmediate(() => {
    for (const c of chunks) s.write(c);
    s.end();
  });
  return s;
}

describe("readLogFrames", () => {
  it("demultiplexes stdout and stderr frames in order, across chunk boundaries", async () => {
    const all = Buffer.concat([frame(1, "out 1\n"), frame(2, "err 1\n"), frame(1, "out 2\nout 3\n")]);
    const chunks = [all.subarray(0, 5), all.subarray(5, 17), all.subarray(17)];
    expect(await readLogFrames(feed(chunks), 1024)).toEqual({ lines: ["out 1", "err 1", "out 2", "out 3"], truncated: false });
  });

  it("reads raw text from a TTY container", async () => {
    expect(await readLogFrames(feed([Buffer.from("hello tty\r\nsecond line\n")]), 1024)).toEqual({ lines: ["hello tty", "second line"], truncated: false });
  });

  it("stops at maxBytes and says so", async () => {
    const chunks = [frame(1, "a".repeat(10) + "\n"), frame(1, "b".repeat(10) + "\n"), frame(1, "c\n")];
    expect(await readLogFrames(feed(chunks), 15)).toEqual({ lines: ["a".repeat(10)], truncated: true });
  });
});
