import { z } from "zod";

/**
 * A relative folder a user names inside something the platform reads or writes (a bucket's key
 * prefix, a repository's template folder): "" or segments of letters, digits, '.', '_' and '-'
 * separated by '/', never a '.' or '..' segment; slashes at either end are dropped
 * (/templates/compose/ -> templates/compose). What it names cannot step outside its root.
 */
export const RelativeFolder = z
  .string()
  .trim()
  .max(512)
  .transform((v) => v.replace(/^\/+/, "").replace(/\/+$/, ""))
  .refine(
    (v) => v === "" || v.split("/").every((s) => /^[A-Za-z0-9._-]+$/.test(s) && s !== "." && s !== ".."),
    "Segments of letters, digits, '.', '_' and '-' separated by '/', without '.' or '..' segments.",
  );
