import { repoPath } from "../lib/paths.js";
import { type LoadedTemplates, loadTemplateDir } from "./loader.js";

/**
 * The built-in catalog: control-plane/templates/ of the checkout the control plane runs from.
 * lib/paths.ts finds the checkout's root from this module, under vitest/tsx (src/) and after a
 * build (dist/) alike, so the catalog is read from the same folder in both; `npm run build`
 * copies nothing.
 */
export const BUILT_IN_CATALOG_DIR = repoPath("control-plane", "templates");

let cached: Promise<LoadedTemplates> | null = null;

/** The built-in catalog, read once per process (its files change only with the checkout). */
export function builtInCatalog(): Promise<LoadedTemplates> {
  cached ??= loadTemplateDir(BUILT_IN_CATALOG_DIR).catch((err: unknown) => {
    cached = null;
    throw err;
  });
  return cached;
}
