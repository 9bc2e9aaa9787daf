import { describe, expect, it } from "vitest";
import { createLogger, redactSecrets } from "./log.js";

/** A logger writing into an array, one parsed object per line. */
function capture() {
  const lines: Record<string, any>[] = [];
  const log = createLogger("info", { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { log, lines };
}

const SECRETS = {
  access_key: "AKIA-ACCESS-KEY-VALUE",
  secret_key: "s3-secret-key-value",
  passphrase: "restore-passphrase-value",
  encryption_passphrase: "storage-passphrase-value",
  postgres_password: "pg-password-value",
  mysql_password: "mysql-password-value",
  mysql_root_password: "mysql-root-password-value",
  mariadb_password: "mariadb-password-value",
  mariadb_root_password: "mariadb-root-password-value",
  mongo_initdb_root_password: "mongo-password-value",
  redis_password: "redis-password-value",
  keydb_password: "keydb-password-value",
  dragonfly_password: "dragonfly-password-value",
  clickhouse_admin_password: "clickhouse-password-value",
  password: "plain-password-value",
  token: "api-token-value",
  private_key: "-----BEGIN OPENSSH PRIVATE KEY-----",
  internal_db_url: "postgres://app:pg-password-value@db:5432/app",
};

describe("log redaction", () => {
  it("hides secret fields of request bodies and job payloads at any depth, keeping everything else", () => {
    const { log, lines } = capture();
    const body = { name: "orders", postgres_user: "app", ...SECRETS };
    const restore = { type: "db.restore", payload: { from: { local_path: null, s3: { target: { endpoint: "https://s3.example.com", bucket: "b", ...SECRETS } } } } };
    log.info({ body }, "top-level body");
    log.info({ req: { method: "POST", body } }, "request body");
    log.warn({ job: restore, items: [{ secret_key: SECRETS.secret_key, key: "kept" }] }, "nested payload");
    log.info(SECRETS, "fields at the top");

    expect(lines).toHaveLength(4);
    const text = JSON.stringify(lines);
    for (const [field, value] of Object.entries(SECRETS)) expect(text, field).not.toContain(value);
    expect(lines[0]!.body).toEqual({ name: "orders", postgres_user: "app", ...Object.fromEntries(Object.keys(SECRETS).map((k) => [k, "[redacted]"])) });
    expect(lines[1]!.req).toMatchObject({ method: "POST", body: { name: "orders", redis_password: "[redacted]", clickhouse_admin_password: "[redacted]" } });
    expect(lines[2]!.job.payload.from.s3.target).toMatchObject({ endpoint: "https://s3.example.com", bucket: "b", access_key: "[redacted]", secret_key: "[redacted]" });
    expect(lines[2]!.job.payload.from.local_path).toBeNull();
    expect(lines[2]!.items).toEqual([{ secret_key: "[redacted]", key: "kept" }]);
    expect(lines[3]).toMatchObject({ msg: "fields at the top", mongo_initdb_root_password: "[redacted]", passphrase: "[redacted]" });
  });

  it("never changes the logged objects, copies nothing without a secret, and keeps errors errors", () => {
    const body = { name: "x", s3: { target: { secret_key: "abc" } }, at: new Date(0), bytes: Buffer.from("secret_key") };
    const out = redactSecrets(body);
    expect(body.s3.target.secret_key).toBe("abc");
    expect(out.s3.target.secret_key).toBe("[redacted]");
    expect(out.at).toBe(body.at);
    expect(out.bytes).toBe(body.bytes);
    const plain = { req: { id: "1", method: "GET", path: "/api/v1/servers" }, res: { statusCode: 200 } };
    expect(redactSecrets(plain)).toBe(plain);

    const err = Object.assign(new Error("upload failed"), { code: "E_S3", meta: { access_key: "AKIA-IN-ERROR" } });
    const { log, lines } = capture();
    log.error({ err }, "failed");
    expect(lines[0]!.err).toMatchObject({ type: "Error", message: "upload failed", code: "E_S3", meta: { access_key: "[redacted]" } });
    expect(lines[0]!.err.stack).toContain("upload failed");
    expect(err.meta.access_key).toBe("AKIA-IN-ERROR");
  });

  it("ends on reference cycles and never hands on an object it did not look into", () => {
    const a: Record<string, unknown> = { password: "p" };
    a.self = a;
    let node = redactSecrets({ a }) as Record<string, any>;
    let depth = 0;
    for (node = node.a; typeof node === "object"; node = node.self) {
      expect(node.password).toBe("[redacted]");
      depth++;
    }
    expect(node).toBe("[too deep]");
    expect(depth).toBeLessThan(12);
    const { log, lines } = capture();
    log.info({ a }, "cycle");
    expect(JSON.stringify(lines[0])).not.toContain('"p"');
  });
});
