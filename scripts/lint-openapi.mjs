// `npm run lint:openapi`: builds the OpenAPI document from the route table (the same code
// that serves /api/v1/openapi.json) and lints it with Redocly's recommended ruleset
// (redocly.yaml). Exits non-zero when the linter reports an error.
//
// The TypeScript sources are loaded through tsx, with @capstan/shared aliased to its
// sources as vitest does, so the lint never sees a stale build and needs no `npm run build`.
// Redocly runs fully offline: telemetry and the npm update check are switched off.
//
// usage: node scripts/lint-openapi.mjs [--out FILE] [extra `redocly lint` options]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { register } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

const args = process.argv.slice(2);
let out = null;
const outAt = args.indexOf("--out");
if (outAt !== -1) {
  out = args[outAt + 1];
  if (!out) {
    console.error("usage: node scripts/lint-openapi.mjs [--out FILE] [redocly lint options]");
    process.exit(2);
  }
  args.splice(outAt, 2);
}

// A resolve hook that sends @capstan/shared to shared/src/index.ts; tsx then compiles it.
const sharedSrc = pathToFileURL(join(root, "shared/src/index.ts")).href;
const aliasHook = `export async function resolve(specifier, context, next) {
  if (specifier === "@capstan/shared") return { url: ${JSON.stringify(sharedSrc)}, shortCircuit: true };
  return next(specifier, context);
}`;
register("data:text/javascript," + encodeURIComponent(aliasHook));
const { register: registerTsx } = await import("tsx/esm/api");
registerTsx();

const src = (p) => pathToFileURL(join(root, "control-plane/src", p)).href;
const { openApiDocument } = await import(src("http/openapi.ts"));
const { routes } = await import(src("http/routes/index.ts"));
const document = openApiDocument(routes);

const dir = mkdtempSync(join(tmpdir(), "capstan-openapi-"));
const file = join(dir, "openapi.json");
writeFileSync(file, JSON.stringify(document, null, 2) + "\n");
if (out) writeFileSync(resolve(out), JSON.stringify(document, null, 2) + "\n");

const cli = join(root, "node_modules/@redocly/cli/bin/cli.js");
const result = spawnSync(
  process.execPath,
  [cli, "lint", "--config", join(root, "redocly.yaml"), ...args, file],
  {
    cwd: root,
    stdio: "inherit",
    env: {
      ...process.env,
      REDOCLY_TELEMETRY: "off",
      REDOCLY_SUPPRESS_UPDATE_NOTICE: "true",
      REDOCLY_SUPPRESS_NOTIFICATIONS: "true",
    },
  },
);
rmSync(dir, { recursive: true, force: true });
if (result.error) {
  console.error(`cannot run the Redocly CLI: ${result.error.message}`);
  process.exit(2);
}
console.log(
  result.status === 0
    ? `OpenAPI document (${routes.length} operations) passed the lint.`
    : `OpenAPI lint failed (exit ${result.status ?? result.signal}).`,
);
process.exit(result.status ?? 1);
