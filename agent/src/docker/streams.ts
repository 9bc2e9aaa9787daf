/**
 * Parsers of the Docker Engine's response streams: JSON-lines progress (build, pull, push),
 * build output split into lines, and multiplexed log frames. No engine access of their own:
 * they read whatever stream they are given (tests feed them buffers).
 */

export interface EngineMessage {
  stream?: unknown;
  status?: unknown;
  id?: unknown;
  aux?: unknown;
  error?: unknown;
  errorDetail?: { message?: unknown };
}

/**
 * Reads the engine's JSON-lines progress stream (build, pull), calling onMessage for each
 * object; an exception from onMessage ends the read with that error. Aborting the signal ends
 * it with an AbortError (the request itself is aborted by docker-modem).
 */
export function readJsonLines(stream: NodeJS.ReadableStream, signal: AbortSignal | undefined, onMessage: (msg: EngineMessage) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let buf = "";
    let done = false;
    const finish = (err?: unknown) => {
      if (done) return;
      done = true;
      signal?.removeEventListener("abort", onAbort);
      stream.removeListener("data", onData);
      if (err) {
        (stream as { destroy?: () => void }).destroy?.();
        reject(err);
      } else resolve();
    };
    const onAbort = () => finish(Object.assign(new Error("aborted"), { name: "AbortError" }));
    const handle = (line: string) => {
      const trimmed = line.trim();
      if (!trimmed) return;
      let msg: EngineMessage;
      try {
        msg = JSON.parse(trimmed) as EngineMessage;
      } catch {
        msg = { stream: `${trimmed}\n` };
      }
      onMessage(msg);
    };
    const onData = (chunk: Buffer | string) => {
      buf += chunk.toString();
      let nl: number;
      try {
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          handle(line);
        }
      } catch (err) {
        finish(err);
      }
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    stream.on("data", onData);
    stream.on("error", (err) => finish(err));
    const onEnd = () => {
      if (done) return;
      try {
        handle(buf);
        finish();
      } catch (err) {
        finish(err);
      }
    };
    stream.on("end", onEnd);
    stream.on("close", onEnd);
  });
}

/** Turns chunks of text into whole lines (the engine splits build output arbitrarily). */
export class LineSplitter {
  private buf = "";
  constructor(private readonly onLine: (line: string) => void) {}
  push(text: string): void {
    this.buf += text;
    let nl: number;
    while ((nl = this.buf.indexOf("\n")) >= 0) {
      this.onLine(this.buf.slice(0, nl).replace(/\r$/, ""));
      this.buf = this.buf.slice(nl + 1);
    }
  }
  end(): void {
    if (this.buf) this.onLine(this.buf.replace(/\r$/, ""));
    this.buf = "";
  }
}

/**
 * Reads a (non-follow) logs response: 8-byte frame headers (stream type, length) when the
 * container has no TTY, raw text otherwise. Stops after maxBytes of text.
 */
export function readLogFrames(stream: NodeJS.ReadableStream, maxBytes: number, signal?: AbortSignal): Promise<{ lines: string[]; truncated: boolean }> {
  return new Promise((resolve, reject) => {
    let pending = Buffer.alloc(0);
    let raw: boolean | null = null;
    let text = "";
    let bytes = 0;
    let truncated = false;
    let done = false;
    const lines: string[] = [];
    const emit = (s: string) => {
      text += s;
      let nl: number;
      while ((nl = text.indexOf("\n")) >= 0) {
        lines.push(text.slice(0, nl).replace(/\r$/, ""));
        text = text.slice(nl + 1);
      }
    };
    const take = (b: Buffer): boolean => {
      if (bytes + b.length > maxBytes) {
        truncated = true;
        return false;
      }
      bytes += b.length;
      emit(b.toString("utf8"));
      return true;
    };
    const finish = (err?: unknown) => {
      if (done) return;
      done = true;
      signal?.removeEventListener("abort", onAbort);
      stream.removeListener("data", onData);
      if (err) return reject(err);
      if (text) lines.push(text);
      resolve({ lines, truncated });
    };
    const stop = () => {
      (stream as { destroy?: () => void }).destroy?.();
      finish();
    };
    const onAbort = () => finish(Object.assign(new Error("aborted"), { name: "AbortError" }));
    const onData = (chunk: Buffer | string) => {
      pending = Buffer.concat([pending, typeof chunk === "string" ? Buffer.from(chunk) : chunk]);
      if (raw === null && pending.length >= 8) {
        raw = !(pending[0]! <= 2 && pending[1] === 0 && pending[2] === 0 && pending[3] === 0);
      }
      if (raw === null) return;
      if (raw) {
        const b = pending;
        pending = Buffer.alloc(0);
        if (!take(b)) stop();
        return;
      }
      while (pending.length >= 8) {
        const len = pending.readUInt32BE(4);
        if (pending.length < 8 + len) break;
        const frame = pending.subarray(8, 8 + len);
        pending = pending.subarray(8 + len);
        if (!take(frame)) return stop();
      }
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    stream.on("data", onData);
    stream.on("error", (err) => finish(err));
    const onEnd = () => {
      if (raw !== false && pending.length > 0) take(pending);
      finish();
    };
    stream.on("end", onEnd);
    stream.on("close", onEnd);
  });
}

