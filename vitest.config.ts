import { defineConfig } from "vitest/config";
import { fileURLToPath } from "node:url";

const sharedSrc = fileURLToPath(new URL("./shared/src/index.ts", import.meta.url));
// Subpath entries of @capstan/shared (package.json "exports"); listed before the package itself.
const sharedS3 = fileURLToPath(new URL("./shared/src/s3/index.ts", import.meta.url));
const sharedOpenpgp = fileURLToPath(new URL("./shared/src/openpgp/index.ts", import.meta.url));
const sharedNet = fileURLToPath(new URL("./shared/src/net/address-guard.ts", import.meta.url));

export default defineConfig({
  resolve: { alias: { "@capstan/shared/s3": sharedS3, "@capstan/shared/net": sharedNet, "@capstan/shared/openpgp": sharedOpenpgp, "@capstan/shared": sharedSrc } },
  test: {
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["shared/src/**/*.test.ts", "control-plane/src/**/*.test.ts", "agent/src/**/*.test.ts", "test/support/**/*.test.ts"] },
      },
      {
        extends: true,
        test: {
          name: "api",
          include: ["test/api/**/*.test.ts"],
          // A failing test prints the control plane's warnings and errors of its time.
          setupFiles: ["test/api/setup.ts"],
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          globalSetup: ["test/e2e/global-setup.ts"],
          testTimeout: 180_000,
          hookTimeout: 600_000,
          // Test hosts are whole Docker engines: one file at a time on 2 cores.
          fileParallelism: false,
        },
      },
      // ---- dashboard (issue 22): Debian's Chromium through playwright-core, a real control plane ----
      {
        extends: true,
        test: {
          name: "browser",
          include: ["test/browser/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          // One browser at a time on 2 cores.
          fileParallelism: false,
        },
      },
    ],
  },
});
