import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { JOB_TYPES } from "@capstan/shared";
import { compileMapSnippets, messageOf } from "../../../test/support/exhaustive-map.js";
import { createHandlers } from "../handlers/index.js";
import type { Engine } from "../docker/engine.js";

const typesModule = fileURLToPath(new URL("./types.ts", import.meta.url));

describe("handler map exhaustiveness", () => {
  it("createHandlers has exactly one handler per job type in JOBS", () => {
    const map = createHandlers({} as Engine);
    expect(Object.keys(map).sort()).toEqual([...JOB_TYPES].sort());
    for (const type of JOB_TYPES) expect(typeof map[type]).toBe("function");
  });

  it("a map missing a job type does not compile; a complete one does", { timeout: 60_000 }, async () => {
    const snippets = await compileMapSnippets({
      module: typesModule,
      typeName: "HandlerMap",
      prelude: "const h = async () => { throw new Error(); };",
      entries: JOB_TYPES.map((t) => `${JSON.stringify(t)}: h`),
    });
    expect(snippets.elsewhere).toEqual([]);

    const bad = snippets.missing;
    expect(bad).toHaveLength(1);
    expect(bad[0]?.code).toBe(2741); // Property '...' is missing in type ...
    expect(messageOf(bad[0]!)).toContain(JOB_TYPES[0]);
  });
});
