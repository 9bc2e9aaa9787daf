import { redactSecrets } from "@capstan/shared";
import type { LogLevel } from "./config.js";

/** Minimal structured logger: one JSON object per line on stdout (journald/docker logs friendly). */
export interface Logger {
  error(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

const RANK: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };
/** Errors as their message and code (a stack or a cause chain can carry request data). */
function serializeErrors(value: unknown): unknown {
  if (value instanceof Error) {
    const out: Record<string, unknown> = { message: value.message };
    const code = (value as { code?: unknown }).code;
    if (code !== undefined) out.code = code;
    return out;
  }
  if (value && typeof value === "object" && !Array.isArray(value)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, serializeErrors(v)]));
  }
  return value;
}

export function createLogger(
  level: LogLevel,
  write: (line: string) => void = (line) => process.stdout.write(line + "\n"),
  base: Record<string, unknown> = {},
): Logger {
  const at = (lvl: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (RANK[lvl] > RANK[level]) return;
    const record = { time: new Date().toISOString(), level: lvl, msg, ...base, ...(fields ?? {}) };
    write(JSON.stringify(redactSecrets(serializeErrors(record))));
  };
  return {
    error: at("error"),
    warn: at("warn"),
    info: at("info"),
    debug: at("debug"),
    child: (fields) => createLogger(level, write, { ...base, ...fields }),
  };
}

/** A logger that drops everything (tests). */
export const silentLogger: Logger = {
  error() {},
  warn() {},
  info() {},
  debug() {},
  child: () => silentLogger,
};

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === "string") return err;
  try {
    return JSON.stringify(err);
  } catch {
    return String(err);
  }
}
