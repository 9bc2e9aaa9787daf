import { defineConfig } from "vitest/config";
import { fileURLToPath } from "node:url";

const sharedSrc = fileURLToPath(new URL("./shared/src/index.ts", import.meta.url));

export default defineConfig({
  resolve: { alias: { "@capstan/shared": sharedSrc } },
  test: {
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["shared/src/**/*.test.ts", "control-plane/src/**/*.test.ts", "agent/src/**/*.test.ts"] },
      },
      {
        extends: true,
        test: {
          name: "api",
          include: ["test/api/**/*.test.ts"],
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
