// Generates the PostgreSQL twin of prisma/schema.prisma and both Prisma clients.
// Runs offline: `prisma generate` only needs PRISMA_SCHEMA_ENGINE_BINARY to name an
// existing executable (it never runs it); the client itself is built from bundled WASM.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { postgresSchemaFrom } from "./prisma-schema-twin.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const sqliteSchema = join(root, "prisma/schema.prisma");
const pgSchema = join(root, "prisma/postgresql/schema.prisma");


const expected = postgresSchemaFrom(readFileSync(sqliteSchema, "utf8"));
if (process.argv.includes("--check")) {
  if (!existsSync(pgSchema) || readFileSync(pgSchema, "utf8") !== expected) {
    console.error("prisma/postgresql/schema.prisma is out of date: run npm run db:generate");
    process.exit(1);
  }
  process.exit(0);
}
mkdirSync(dirname(pgSchema), { recursive: true });
writeFileSync(pgSchema, expected);

const prismaCli = join(root, "node_modules/prisma/build/index.js");
if (!existsSync(prismaCli)) {
  console.log("prisma CLI not installed yet; skipping client generation");
  process.exit(0);
}
const env = {
  ...process.env,
  PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath,
  PRISMA_HIDE_UPDATE_MESSAGE: "1",
  CHECKPOINT_DISABLE: "1",
};
for (const schema of [sqliteSchema, pgSchema]) {
  execFileSync(process.execPath, [prismaCli, "generate", "--schema", schema], {
    cwd: root,
    env,
    stdio: ["ignore", "ignore", "inherit"],
  });
}
console.log("prisma clients generated (sqlite, postgresql)");
