import { describe, expect, it } from "vitest";
import { createLogger } from "./log.js";

describe("agent log lines", () => {
  it("never carry secrets, at any depth, by the names the control plane redacts and by names that say secret", () => {
    const lines: string[] = [];
    const log = createLogger("debug", (l) => lines.push(l)).child({ job: "j1" });
    log.info("backup", {
      target: { bucket: "b", access_key: "AKIA-VISIBLE-NOT", secret_key: "s3-secret-value", endpoint: "http://s3.test" },
      encryption: { passphrase: "pgp-passphrase-value" },
      env: { POSTGRES_PASSWORD: "pg-password-value", CAPSTAN_AGENT_TOKEN: "agent-token-value", PGHOST: "db" },
      internal_db_url: "postgres://app:url-password@db:5432/app",
      err: Object.assign(new Error("upload failed"), { code: "ECONNRESET" }),
    });
    const line = lines[0]!;
    for (const secret of ["AKIA-VISIBLE-NOT", "s3-secret-value", "pgp-passphrase-value", "pg-password-value", "agent-token-value", "url-password"]) {
      expect(line).not.toContain(secret);
    }
    const record = JSON.parse(line);
    expect(record).toMatchObject({
      level: "info",
      msg: "backup",
      job: "j1",
      target: { bucket: "b", endpoint: "http://s3.test", access_key: "[redacted]" },
      env: { PGHOST: "db", POSTGRES_PASSWORD: "[redacted]" },
      err: { message: "upload failed", code: "ECONNRESET" },
    });
  });

  it("drops records below the level", () => {
    const lines: string[] = [];
    createLogger("warn", (l) => lines.push(l)).info("quiet");
    expect(lines).toEqual([]);
  });
});
