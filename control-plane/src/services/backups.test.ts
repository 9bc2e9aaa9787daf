import { describe, expect, it } from "vitest";
import { backupFilename, backupKeyPrefix, cronErrors } from "./backups/index.js";
import { shortReason } from "./s3-storages.js";
import { tickMinute } from "../backups/scheduler.js";

describe("backup names", () => {
  it("filename: engine, UTC stamp, execution uuid prefix, extension, .gpg when encrypted", () => {
    const at = new Date("2026-11-22T07:05:09.123Z");
    expect(backupFilename("postgresql", at, "0f1e2d3c-aaaa-bbbb-cccc-000000000000", false)).toBe("postgresql-20261122T070509Z-0f1e2d3c.sql.gz");
    expect(backupFilename("mongodb", at, "0f1e2d3c-aaaa", true)).toBe("mongodb-20261122T070509Z-0f1e2d3c.archive.gz.gpg");
    expect(backupFilename("redis", at, "12345678", false)).toMatch(/\.rdb\.gz$/);
  });

  it("object keys live under the storage prefix and the database uuid", () => {
    expect(backupKeyPrefix("backups/prod/", "db-1")).toBe("backups/prod/db-1/");
    expect(backupKeyPrefix("", "db-1")).toBe("db-1/");
  });
});

describe("cron checks", () => {
  it("accepts what node-cron runs, names the field that is wrong otherwise", () => {
    for (const ok of ["0 3 * * *", "*/15 * * * 1-5", "@hourly", "@weekly", "0 0 1 jan,jul *"]) expect(cronErrors(ok), ok).toBeNull();
    expect(cronErrors("61 * * * *")?.[0]).toMatch(/^minute:/);
    expect(cronErrors("0 25 * * *")?.[0]).toMatch(/^hour:/);
    expect(cronErrors("0 0 31 2 *")?.[0]).toMatch(/dayOfMonth/);
  });

  it("a tick's run key is its UTC minute", () => {
    expect(tickMinute(new Date("2026-01-01T03:00:59.999Z")).toISOString()).toBe("2026-01-01T03:00:00.000Z");
  });
});

describe("reasons from remote servers", () => {
  it("one line, control characters gone, at most 200 characters", () => {
    expect(shortReason("Access\nDenied\t\u0007 (HTTP 403)")).toBe("Access Denied (HTTP 403)");
    const long = shortReason("x".repeat(5000));
    expect(long.length).toBe(200);
    expect(shortReason("   ")).toBe("unknown error");
  });
});
