import { describe, expect, it } from "vitest";
import { CreateS3StorageBody, S3Bucket, S3Endpoint, S3PathPrefix } from "./s3-storages.js";
import { CreateBackupScheduleBody, CronExpression } from "./backups.js";

describe("S3 storage fields", () => {
  it("endpoints are http(s) origins without credentials, path, query or fragment", () => {
    expect(S3Endpoint.parse("https://s3.eu-central-1.amazonaws.com/")).toBe("https://s3.eu-central-1.amazonaws.com");
    expect(S3Endpoint.parse(" http://10.0.0.5:9000 ")).toBe("http://10.0.0.5:9000");
    expect(S3Endpoint.parse("HTTPS://S3.Example.COM")).toBe("https://s3.example.com");
    for (const bad of ["ftp://x", "https://a:b@x", "https://x/path", "https://x/?a=1", "https://x/#f", "x", "", "file:///etc/passwd", "javascript:alert(1)"]) {
      expect(S3Endpoint.safeParse(bad).success, bad).toBe(false);
    }
  });

  it("bucket names follow S3's general-purpose rules", () => {
    for (const good of ["abc", "my-bucket", "my.bucket.1", "a".repeat(63)]) expect(S3Bucket.safeParse(good).success, good).toBe(true);
    for (const bad of ["ab", "a".repeat(64), "My-Bucket", "my_bucket", "-abc", "abc-", ".abc", "a..b", "192.168.5.4", "xn--abc", "sthree-abc", "abc-s3alias", "abc--ol-s3", "a b"]) {
      expect(S3Bucket.safeParse(bad).success, bad).toBe(false);
    }
  });

  it("path prefixes are normalised to end with a slash and never traverse", () => {
    expect(S3PathPrefix.parse("")).toBe("");
    expect(S3PathPrefix.parse("/backups/prod/")).toBe("backups/prod/");
    expect(S3PathPrefix.parse("backups")).toBe("backups/");
    for (const bad of ["../x", "a/../b", "a/./b", "a b", "a//b", "a\\b", "ü"]) expect(S3PathPrefix.safeParse(bad).success, bad).toBe(false);
  });

  it("defaults: region us-east-1, path style, no prefix, no passphrase", () => {
    const b = CreateS3StorageBody.parse({ name: "s", endpoint: "https://s3.example.com", bucket: "bucket", access_key: "ak", secret_key: "sk" });
    expect(b).toMatchObject({ region: "us-east-1", path_style: true, path_prefix: "", description: "" });
    expect(b.encryption_passphrase).toBeUndefined();
    expect(CreateS3StorageBody.safeParse({ ...b, encryption_passphrase: "short" }).success).toBe(false);
  });
});

describe("backup schedule fields", () => {
  it("cron expressions: five fields or a macro, whitespace normalised", () => {
    expect(CronExpression.parse("  0   3 * *  * ")).toBe("0 3 * * *");
    expect(CronExpression.parse("@daily")).toBe("@daily");
    for (const bad of ["* * * *", "* * * * * *", "@every 5m", "", "x".repeat(200)]) expect(CronExpression.safeParse(bad).success, bad).toBe(false);
  });

  it("defaults as the spec says, with the remote count unset", () => {
    expect(CreateBackupScheduleBody.parse({ frequency: "@daily" })).toEqual({ frequency: "@daily", number_of_backups_locally: 7, number_of_backups_remote: null, enabled: true });
  });
});
