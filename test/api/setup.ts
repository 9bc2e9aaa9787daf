import { afterEach, beforeEach } from "vitest";
import { recentLogMark, recentLogSince } from "./support/recent-log.js";

// Since the end of the test before (this file's beforeAll for the first one).
let since = 0;
beforeEach(({ onTestFailed }) => {
  const from = since;
  onTestFailed(() => {
    const lines = recentLogSince(from);
    if (lines.length) process.stderr.write(`The control plane's warnings and errors during this test:\n${lines.join("")}`);
  });
});
afterEach(() => {
  since = recentLogMark();
});
