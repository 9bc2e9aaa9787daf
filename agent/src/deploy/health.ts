import type { HealthCheck } from "@capstan/shared";
import type { ContainerHealthcheck } from "../docker/engine.js";

/** What HealthPath allows; checked again here because the URL is placed inside a shell command. */
const SAFE_PATH = /^\/[A-Za-z0-9._~/-]*(\?[A-Za-z0-9._~=&%-]*)?$/;

export function healthUrl(h: Pick<HealthCheck, "port" | "path">): string {
  if (!SAFE_PATH.test(h.path) || !Number.isInteger(h.port) || h.port < 1 || h.port > 65535) {
    throw new Error(`health check path ${JSON.stringify(h.path)} is not allowed`);
  }
  return `http://127.0.0.1:${h.port}${h.path}`;
}

/**
 * A Docker HEALTHCHECK probing the app from inside its container with whichever of curl and
 * wget the image has. The URL is single-quoted and can hold no quote (SAFE_PATH). No wget -T:
 * busybox builds without it crash on it; the engine's own timeout bounds the probe instead.
 */
export function healthcheckFor(h: HealthCheck): ContainerHealthcheck {
  const url = `'${healthUrl(h)}'`;
  const script =
    `if command -v curl >/dev/null 2>&1; then curl -fsS -o /dev/null ${url}; ` +
    `elif command -v wget >/dev/null 2>&1; then wget -q -O /dev/null ${url}; ` +
    `else echo 'health check needs curl or wget in the image' >&2; exit 1; fi`;
  return {
    test: ["CMD-SHELL", script],
    intervalS: h.interval_s,
    timeoutS: h.timeout_s,
    retries: h.retries,
    startPeriodS: h.start_period_s,
  };
}
