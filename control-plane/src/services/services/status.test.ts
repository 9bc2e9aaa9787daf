import { describe, expect, it } from "vitest";
import { aggregateServiceStatus } from "./status.js";

const c = (status: string, excludeFromStatus = false) => ({ status, excludeFromStatus });

describe("aggregateServiceStatus (docs/services.md: one rule)", () => {
  it("is exited without counted components or when all counted ones are down", () => {
    expect(aggregateServiceStatus([])).toBe("exited");
    expect(aggregateServiceStatus([c("running:healthy", true)])).toBe("exited");
    expect(aggregateServiceStatus([c("exited"), c("exited:1")])).toBe("exited");
  });
  it("is running:healthy only when every counted component is healthy", () => {
    expect(aggregateServiceStatus([c("running:healthy"), c("running:healthy"), c("exited", true)])).toBe("running:healthy");
    expect(aggregateServiceStatus([c("running:healthy"), c("running:unknown")])).toBe("running:unknown");
    expect(aggregateServiceStatus([c("running:healthy"), c("running:starting")])).toBe("running:unknown");
  });
  it("is degraded when one is unhealthy or some are down while others run", () => {
    expect(aggregateServiceStatus([c("running:healthy"), c("running:unhealthy")])).toBe("degraded");
    expect(aggregateServiceStatus([c("running:healthy"), c("exited")])).toBe("degraded");
    expect(aggregateServiceStatus([c("restarting"), c("exited")])).toBe("degraded");
  });
  it("is starting while components come up", () => {
    expect(aggregateServiceStatus([c("running:healthy"), c("restarting")])).toBe("starting");
    expect(aggregateServiceStatus([c("created"), c("created")])).toBe("starting");
  });
});
