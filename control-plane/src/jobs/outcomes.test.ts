import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { JOB_TYPES } from "@capstan/shared";
import { compileMapSnippets, messageOf } from "../../../test/support/exhaustive-map.js";
import { inTurn, type EndedJob } from "./outcomes.js";

const outcomesModule = fileURLToPath(new URL("./outcomes.ts", import.meta.url));

describe("the job-outcome map", () => {
  it("a map missing a job type does not compile; one deciding every type (handler or null) does", { timeout: 60_000 }, async () => {
    const snippets = await compileMapSnippets({
      module: outcomesModule,
      typeName: "OutcomeMap",
      prelude: "const h = async () => {};",
      entries: JOB_TYPES.map((t, i) => `${JSON.stringify(t)}: ${i % 2 ? "null" : "h"}`),
    });
    expect(snippets.elsewhere).toEqual([]);
    const bad = snippets.missing;
    expect(bad).toHaveLength(1);
    expect(bad[0]?.code).toBe(2741); // Property '...' is missing in type ...
    expect(messageOf(bad[0]!)).toContain(JOB_TYPES[0]);
  });

  it("inTurn runs every handler even after one failed, then throws the first failure (the outcome stays unapplied)", async () => {
    const ran: string[] = [];
    const job = { id: "j1" } as EndedJob<"app.deploy">;
    const handler = inTurn<"app.deploy">(
      async () => void ran.push("a"),
      async () => {
        ran.push("b");
        throw new Error("b failed");
      },
      async () => void ran.push("c"),
    );
    await expect(handler(job)).rejects.toThrow("b failed");
    expect(ran).toEqual(["a", "b", "c"]);
  });
});
