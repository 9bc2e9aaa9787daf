import { describe, expect, it } from "vitest";
import type { Db } from "../db/client.js";
import type { SqlReader } from "../db/reader.js";
import type { Caller } from "./caller.js";
import { NotFound } from "./errors.js";
import { TeamScope } from "./scope.js";

/**
 * Torn reads (db/relations.ts): Prisma reads an include's relations after the row, so a row
 * deleted in between comes back without a relation the schema requires. The scope's lookups
 * answer it as what it is, an object that is not there (404), not a TypeError (500).
 */
describe("TeamScope lookups of a row read half gone", () => {
  const owner: Caller = { tokenId: 1, teamId: 7, userId: 1, role: "owner", scopes: new Set(["read"]), features: new Set() };
  const reader = { all: async () => [] } as unknown as SqlReader;
  const row = { id: 3, uuid: "u", teamId: 7, environment: { id: 4, uuid: "e", projectId: 5 }, server: { id: 6, name: "s", status: "reachable" } };
  const scopeOver = (found: unknown) =>
    new TeamScope(owner, { application: { findFirst: async () => found }, standaloneDatabase: { findFirst: async () => found }, deployment: { findFirst: async () => found } } as unknown as Db, reader);

  it("a whole row is found", async () => {
    expect((await scopeOver(row).application("u", "view")).id).toBe(3);
    expect((await scopeOver(row).database("u", "view")).id).toBe(3);
  });

  it("an application or database without its environment or server is not found", async () => {
    for (const torn of [{ ...row, environment: null }, { ...row, server: null }]) {
      await expect(scopeOver(torn).application("u", "view")).rejects.toThrow(NotFound);
      await expect(scopeOver(torn).database("u", "view")).rejects.toThrow(NotFound);
    }
  });

  it("a deployment without its application, or its application without its environment, is not found", async () => {
    const deployment = { id: 8, uuid: "d", teamId: 7, application: { uuid: "a", name: "a", environmentId: 4, environment: row.environment }, server: { uuid: "s" } };
    expect((await scopeOver(deployment).deployment("d", "view")).id).toBe(8);
    await expect(scopeOver({ ...deployment, application: null }).deployment("d", "view")).rejects.toThrow(NotFound);
    await expect(scopeOver({ ...deployment, application: { ...deployment.application, environment: null } }).deployment("d", "view")).rejects.toThrow(NotFound);
  });
});
