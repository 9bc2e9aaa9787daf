// `node --import ./bench/api/register.mjs file.ts`: runs the TypeScript sources through tsx,
// with @capstan/shared sent to shared/src (as vitest does), so the bench needs no build.
import { register } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { register as registerTsx } from "tsx/esm/api";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const sharedSrc = pathToFileURL(join(root, "shared/src/index.ts")).href;
const hook = `export async function resolve(specifier, context, next) {
  if (specifier === "@capstan/shared") return { url: ${JSON.stringify(sharedSrc)}, shortCircuit: true };
  return next(specifier, context);
}`;
register("data:text/javascript," + encodeURIComponent(hook));
registerTsx();
