import { describe, expect, it } from "vitest";
import { healthcheckFor } from "./health.js";

const h = { path: "/healthz?full=1", port: 8080, interval_s: 2, timeout_s: 3, retries: 4, start_period_s: 5 };

describe("healthcheckFor", () => {
  it("probes the single-quoted URL with curl, then wget, as CMD-SHELL with the payload's timings", () => {
    const hc = healthcheckFor(h);
    expect(hc.test[0]).toBe("CMD-SHELL");
    expect(hc.test[1]).toContain("curl -fsS -o /dev/null 'http://127.0.0.1:8080/healthz?full=1'");
    expect(hc.test[1]).toContain("wget -q -O /dev/null 'http://127.0.0.1:8080/healthz?full=1'");
    expect(hc).toMatchObject({ intervalS: 2, timeoutS: 3, retries: 4, startPeriodS: 5 });
  });

  it("refuses a path that could leave the quotes", () => {
    expect(() => healthcheckFor({ ...h, path: "/x';reboot;'" })).toThrow(/not allowed/);
    expect(() => healthcheckFor({ ...h, path: "/$(id)" })).toThrow(/not allowed/);
  });
});
