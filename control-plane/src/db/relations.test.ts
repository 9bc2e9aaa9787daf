import { describe, expect, it } from "vitest";
import { whole, wholeRows } from "./relations.js";

describe("torn reads (a row whose required relation came back null was removed while it was read)", () => {
  const app = { id: 1, gitApp: null, environment: { id: 2, project: { uuid: "p" } }, server: { uuid: "s" } };

  it("keeps a row whose named relations are all there, optional ones (not named) may be null", () => {
    expect(whole(app, ["environment", "environment.project", "server"])).toBe(app);
  });

  it("a named relation, or one nested in it, that is null makes the row count as gone", () => {
    expect(whole({ ...app, environment: null }, ["environment", "server"])).toBeNull();
    expect(whole({ ...app, environment: { id: 2, project: null } }, ["environment.project"])).toBeNull();
    expect(whole({ ...app, environment: null }, ["environment.project"])).toBeNull();
    expect(whole(null, ["environment"])).toBeNull();
  });

  it("lists drop their torn rows and keep the order of the others", () => {
    const rows = [{ id: 1, project: { uuid: "a" } }, { id: 2, project: null }, { id: 3, project: { uuid: "c" } }];
    expect(wholeRows(rows, ["project"]).map((r) => r.id)).toEqual([1, 3]);
  });
});
