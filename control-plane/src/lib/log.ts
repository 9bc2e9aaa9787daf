import { redactSecrets } from "@capstan/shared";
import { pino, type DestinationStream, type Logger } from "pino";

/** `destination`: where lines go instead of stdout. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, formatters: { log: (o: Record<string, unknown>) => redactSecrets(o) }, base: { service: "capstan" } };
  return destination ? pino(options, destination) : pino(options);
}
export type { Logger };
export { redactSecrets };
