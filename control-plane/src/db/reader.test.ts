import { describe, expect, it } from "vitest";
import { toDate, toInt, toIso } from "./reader.js";

describe("reader value normalisation", () => {
  const when = new Date("2026-11-22T01:02:03.045Z");

  it("reads what Prisma's SQLite adapter writes (toISOString with +00:00)", () => {
    expect(toIso("2026-11-22T01:02:03.045+00:00")).toBe("2026-11-22T01:02:03.045Z");
    expect(toDate("2026-11-22T01:02:03.045+00:00")).toEqual(when);
  });

  it("reads SQLite CURRENT_TIMESTAMP text as UTC", () => {
    expect(toIso("2026-11-22 01:02:03")).toBe("2026-11-22T01:02:03.000Z");
  });

  it("reads Dates (PostgreSQL) and epoch milliseconds", () => {
    expect(toIso(when)).toBe("2026-11-22T01:02:03.045Z");
    expect(toIso(when.getTime())).toBe("2026-11-22T01:02:03.045Z");
  });

  it("parses other offsets instead of cutting them off", () => {
    expect(toIso("2026-11-22T02:02:03.045+01:00")).toBe("2026-11-22T01:02:03.045Z");
  });

  it("reads COUNT results of either driver as numbers", () => {
    expect(toInt(3)).toBe(3);
    expect(toInt("1200")).toBe(1200);
  });
});
