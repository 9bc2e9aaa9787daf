import { pino, type Logger } from "pino";

/** Keys whose values never reach a log line, wherever they appear. */
export const REDACT_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  "*.password",
  "*.private_key",
  "*.token",
  "*.secret",
  "*.credentials",
];

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: "[redacted]" }, base: { service: "capstan" } });
}
export type { Logger };
