// The PostgreSQL schema is the SQLite schema with another provider and client output path.
export function postgresSchemaFrom(source) {
  const out = source
    .replace('provider = "sqlite"', 'provider = "postgresql"')
    .replace("db/generated/sqlite", "db/generated/postgresql")
    .replace('output       = "../control-plane', 'output       = "../../control-plane');
  return "// GENERATED from prisma/schema.prisma by scripts/prisma-generate.mjs: edit that file.\n" + out;
}
