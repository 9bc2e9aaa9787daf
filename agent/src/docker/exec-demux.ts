import { Readable, Writable } from "node:stream";

/**
 * Splits the engine's multiplexed exec/attach stream (no TTY: frames of an 8-byte header —
 * stream type 1 stdout / 2 stderr, 4-byte big-endian length — then the payload) into a stdout
 * Readable and a bounded stderr text. Unlike docker-modem's demuxStream it keeps backpressure:
 * a write is acknowledged only once `stdout`'s reader wants more, so a slow consumer (gzip, an
 * upload) pauses the socket, and with it the process in the container, instead of buffering.
 */
export class ExecDemux extends Writable {
  readonly stdout: Readable;
  private header = Buffer.alloc(8);
  private headerLen = 0;
  private type = 0;
  private remaining = 0;
  private waiting: (() => void) | null = null;
  private stderrChunks: Buffer[] = [];
  private stderrBytes = 0;
  private stderrDropped = false;

  /** `stderrLimit`: bytes of stderr kept (the newest ones: a tool's error is usually its last line). */
  constructor(private readonly stderrLimit = 16 * 1024) {
    super();
    this.stdout = new Readable({
      read: () => {
        const resume = this.waiting;
        this.waiting = null;
        resume?.();
      },
      destroy: (err, cb) => {
        // The consumer gave up: nothing will read further frames; release the writer.
        const resume = this.waiting;
        this.waiting = null;
        resume?.();
        cb(err);
      },
    });
  }

  /** What the process wrote to stderr (at most stderrLimit bytes, the newest). */
  stderr(): string {
    const text = Buffer.concat(this.stderrChunks).toString("utf8");
    return this.stderrDropped ? `…${text}` : text;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    let wantMore = true;
    let off = 0;
    while (off < chunk.length) {
      if (this.remaining === 0) {
        const n = Math.min(8 - this.headerLen, chunk.length - off);
        chunk.copy(this.header, this.headerLen, off, off + n);
        this.headerLen += n;
        off += n;
        if (this.headerLen < 8) break;
        this.headerLen = 0;
        this.type = this.header[0]!;
        this.remaining = this.header.readUInt32BE(4);
        continue;
      }
      const n = Math.min(this.remaining, chunk.length - off);
      const part = chunk.subarray(off, off + n);
      off += n;
      this.remaining -= n;
      if (this.type === 2) this.keepStderr(part);
      else if (this.type === 1 && !this.stdout.destroyed) wantMore = this.stdout.push(part) && wantMore;
    }
    if (wantMore || this.stdout.destroyed) cb();
    else this.waiting = () => cb();
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (!this.stdout.destroyed) this.stdout.push(null);
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    if (err && !this.stdout.destroyed) this.stdout.destroy(err);
    cb(err);
  }

  private keepStderr(part: Buffer): void {
    this.stderrChunks.push(Buffer.from(part));
    this.stderrBytes += part.length;
    while (this.stderrBytes > this.stderrLimit) {
      const excess = this.stderrBytes - this.stderrLimit;
      const oldest = this.stderrChunks[0]!;
      if (oldest.length <= excess) this.stderrChunks.shift();
      else this.stderrChunks[0] = oldest.subarray(excess);
      this.stderrBytes -= Math.min(oldest.length, excess);
      this.stderrDropped = true;
    }
  }
}
