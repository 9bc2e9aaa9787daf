import Docker from "dockerode";
import { LABEL_MANAGED } from "@capstan/shared";

/** Container events that can change a resource's status. */
const STATUS_EVENTS = ["create", "start", "restart", "die", "stop", "kill", "oom", "pause", "unpause", "destroy", "health_status"];

export interface ContainerEvent {
  action: string;
  labels: Record<string, string>;
}

/**
 * Follows the engine's event stream for platform-managed containers and calls `onEvent` per
 * event. When the stream breaks (engine restart), it reconnects with a growing delay (capped)
 * and calls `onResync`, because events may have been missed meanwhile.
 */
export function watchContainerEvents(
  socketPath: string,
  handlers: { onEvent(e: ContainerEvent): void; onResync(): void; onError(err: Error): void },
  opts: { minDelayMs?: number; maxDelayMs?: number } = {},
): { stop(): void } {
  const docker = new Docker({ socketPath });
  const min = opts.minDelayMs ?? 1_000;
  const max = opts.maxDelayMs ?? 15_000;
  let delay = min;
  let stopped = false;
  let stream: NodeJS.ReadableStream | null = null;
  let timer: NodeJS.Timeout | null = null;

  const again = (err?: Error) => {
    if (stopped || timer) return;
    if (err) handlers.onError(err);
    timer = setTimeout(() => {
      timer = null;
      void connect();
    }, delay);
    timer.unref();
    delay = Math.min(max, delay * 2);
  };

  const connect = async () => {
    try {
      const s = await docker.getEvents({
        filters: { type: ["container"], label: [`${LABEL_MANAGED}=true`], event: STATUS_EVENTS },
      });
      if (stopped) {
        (s as unknown as { destroy?: () => void }).destroy?.();
        return;
      }
      stream = s;
      delay = min;
      handlers.onResync();
      let buffered = "";
      s.on("data", (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        let nl: number;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (!line) continue;
          try {
            const e = JSON.parse(line) as { Action?: string; Actor?: { Attributes?: Record<string, string> } };
            handlers.onEvent({ action: (e.Action ?? "").split(":")[0]!, labels: e.Actor?.Attributes ?? {} });
          } catch {
            // a torn line cannot happen with newline framing; ignore anything unparsable
          }
        }
        if (buffered.length > 1_000_000) buffered = "";
      });
      s.on("error", (err: Error) => again(err));
      s.on("end", () => again());
    } catch (err) {
      again(err as Error);
    }
  };

  void connect();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      (stream as unknown as { destroy?: () => void } | null)?.destroy?.();
    },
  };
}
