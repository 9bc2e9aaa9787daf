import { afterEach, beforeEach } from "vitest";
import { recentLogMark, recentLogSince } from "./support/recent-log.js";

/** Control-plane lines a failure carries into the JSON report (the run's summary prints its start). */
const NOTE_LINES = 12;

/** One pino line as "level message: error", short enough for a summary line. */
function brief(line: string): string {
  try {
    const l = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
    const level = l.level === 40 ? "warn" : l.level === 50 ? "error" : "fatal";
    return `${level} ${l.msg ?? ""}${l.err?.message ? `: ${l.err.message}` : ""}`.slice(0, 240);
  } catch {
    return line.trim().slice(0, 240);
  }
}

interface ReportedError {
  name?: string;
  message?: string;
  stack?: string;
}

// Since the end of the test before (this file's beforeAll for the first one).
let since = 0;
beforeEach(({ onTestFailed }) => {
  const from = since;
  onTestFailed(({ task }) => {
    const errors = (task.result?.errors ?? []) as ReportedError[];
    // vitest reports a test that ran out of time with the stack of where it was declared,
    // headed "STACK_TRACE_ERROR" in the JSON report: put the real message back in front.
    for (const e of errors) {
      if (e.stack?.startsWith("Error: STACK_TRACE_ERROR") && e.message) e.stack = e.stack.replace("Error: STACK_TRACE_ERROR", `Error: ${e.message}`);
    }
    const lines = recentLogSince(from);
    if (!lines.length) return;
    process.stderr.write(`The control plane's warnings and errors during this test:\n${lines.join("")}`);
    const kept = lines.slice(-NOTE_LINES).map(brief);
    const message = `the control plane's last ${kept.length} warnings and errors during this test`;
    errors.push({ name: "ControlPlaneLog", message, stack: [`ControlPlaneLog: ${message}`, ...kept].join("\n") });
  });
});
afterEach(() => {
  since = recentLogMark();
});
