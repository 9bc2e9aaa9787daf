import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The repository (or image) root: the nearest ancestor of this module holding prisma/.
 * Works from src/ under vitest/tsx and from dist/ after a build.
 */
function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 8; i++) {
    if (existsSync(join(dir, "prisma", "schema.prisma"))) return dir;
    dir = resolve(dir, "..");
  }
  throw new Error("cannot locate the Capstan root (folder with prisma/schema.prisma)");
}

const root = findRoot();
export function repoPath(...parts: string[]): string {
  return join(root, ...parts);
}
