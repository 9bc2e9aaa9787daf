import { describe, expect, it } from "vitest";
import { TomlError, parseToml } from "./toml.js";

/** The adapter around smol-toml (the parser itself is that package's, tested there). */
describe("parseToml", () => {
  it("gives dates as text, large integers as bigint, and keeps __proto__ an ordinary key", () => {
    const doc = parseToml('day = 1979-05-27\nbig = 9_223_372_036_854_775_807\nsmall = 8080\n__proto__ = "x"\n[constructor]\na = 1\n');
    expect(doc.day).toBe("1979-05-27");
    expect(doc.big).toBe(9223372036854775807n);
    expect(doc.small).toBe(8080);
    expect(Object.keys(doc)).toEqual(["day", "big", "small", "__proto__", "constructor"]);
    expect(doc.__proto__).toBe("x");
    expect(({} as Record<string, unknown>).a).toBeUndefined();
  });

  it.each([
    ["[run\n", /^line 1, column 5: .* \(near "\[run"\)$/],
    ['a = "open', /^line 1, column 5: unfinished string/],
    ["a = 1\na = 2", /^line 2, column 1: trying to redefine/],
    ["x = 1\ny = bare", /^line 2, column 5: invalid value \(near "y = bare"\)$/],
  ])("refuses %j naming the line, column and reason", (src, message) => {
    expect(() => parseToml(src)).toThrow(TomlError);
    expect(() => parseToml(src)).toThrow(message);
  });
});
