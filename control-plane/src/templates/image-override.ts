import type { ImageOverrides } from "@capstan/shared";

/**
 * Image overrides (PLATFORM_TEMPLATE_IMAGE_OVERRIDES, docs/configuration.md): a template's
 * upstream image is replaced by a local one when a service is rendered, for tests (no image
 * pulls on the test machines) and air-gapped installations (a mirror registry). Classification
 * still reads the template's own image: overriding `postgres:16` keeps the service a database.
 *
 * Matching, first hit wins:
 *  1. the reference as written (`postgres:16-alpine`);
 *  2. the same reference in Docker's canonical form, so `docker.io/library/postgres:16-alpine`
 *     and `postgres:16-alpine` find each other's entries;
 *  3. the repository alone (`postgres`), which overrides every tag of it.
 */

/** `docker.io/library/x` and `index.docker.io/x` as Docker Hub short names (`x`). */
function canonical(ref: string): string {
  let r = ref.trim();
  r = r.replace(/^(docker\.io|index\.docker\.io|registry-1\.docker\.io)\//, "");
  r = r.replace(/^library\//, "");
  return r;
}

/** The reference without its tag and digest (the registry's port is kept). */
function repository(ref: string): string {
  const noDigest = ref.split("@")[0]!;
  const slash = noDigest.lastIndexOf("/");
  const colon = noDigest.lastIndexOf(":");
  return colon > slash ? noDigest.slice(0, colon) : noDigest;
}

/** The image to run for `image` under `overrides` (the image itself when nothing matches). */
export function overrideImage(image: string, overrides: ImageOverrides): string {
  if (Object.hasOwn(overrides, image)) return overrides[image]!;
  const byCanonical = new Map(Object.entries(overrides).map(([k, v]) => [canonical(k), v]));
  const c = canonical(image);
  return byCanonical.get(c) ?? byCanonical.get(repository(c)) ?? image;
}
