import { describe, expect, it } from "vitest";
import { componentKind, repositoryOf } from "./classify.js";
import { overrideImage } from "./image-override.js";

describe("classification by image (docs/templates.md)", () => {
  it.each([
    "postgres:16-alpine",
    "docker.io/library/postgres:17",
    "postgres@sha256:" + "a".repeat(64),
    "pgvector/pgvector:pg16",
    "mysql:8.4",
    "mariadb:11",
    "mongo:7",
    "redis:7-alpine",
    "valkey/valkey:8",
    "eqalpha/keydb:latest",
    "docker.dragonflydb.io/dragonflydb/dragonfly:v1.23",
    "clickhouse/clickhouse-server:24.8-alpine",
    "bitnami/postgresql:16",
    "localhost:5000/postgres:16",
  ])("%s is a database", (image) => {
    expect(componentKind(image)).toBe("database");
  });

  it.each(["ghcr.io/umami-software/umami:postgresql-latest", "n8nio/n8n:1", "ghost:5-alpine", "grafana/grafana-oss:11", "someone/postgres-backup:1", "postgrest/postgrest:v12", "redis-commander:latest", "minio/minio:latest"])(
    "%s is an application",
    (image) => {
      expect(componentKind(image)).toBe("application");
    },
  );

  it("repositoryOf drops registry, library/, tag and digest", () => {
    expect(repositoryOf("registry.example.com:5000/team/app:1.2@sha256:" + "b".repeat(64))).toBe("team/app");
    expect(repositoryOf("library/redis")).toBe("redis");
  });
});

describe("overrideImage (PLATFORM_TEMPLATE_IMAGE_OVERRIDES)", () => {
  const overrides = {
    "postgres:16-alpine": "capstan-test/postgres:16",
    "docker.io/library/redis:7-alpine": "capstan-test/redis:7",
    "ghcr.io/umami-software/umami": "mirror.local/umami:pinned",
  };

  it("an exact reference, the canonical Docker Hub form, a tagless repository", () => {
    expect(overrideImage("postgres:16-alpine", overrides)).toBe("capstan-test/postgres:16");
    expect(overrideImage("docker.io/library/postgres:16-alpine", overrides)).toBe("capstan-test/postgres:16");
    expect(overrideImage("redis:7-alpine", overrides)).toBe("capstan-test/redis:7");
    expect(overrideImage("ghcr.io/umami-software/umami:postgresql-latest", overrides)).toBe("mirror.local/umami:pinned");
  });

  it("other tags of a tagged key, and other images, are kept", () => {
    expect(overrideImage("postgres:17", overrides)).toBe("postgres:17");
    expect(overrideImage("nginx:1.27", overrides)).toBe("nginx:1.27");
    expect(overrideImage("nginx:1.27", {})).toBe("nginx:1.27");
  });
});
