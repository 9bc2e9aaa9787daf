import { describe, expect, it } from "vitest";
import { TomlError, parseToml } from "./toml.js";

describe("parseToml", () => {
  it("reads tables, dotted and quoted keys, and every scalar form", () => {
    const doc = parseToml(`
# comment
title = "TOML \\"x\\" \\u00e9\\t" # trailing comment
literal = 'C:\\Users\\nope'
int = +1_000
hex = 0xff
oct = 0o17
bin = 0b101
big = 9_223_372_036_854_775_807
float = -3.5e2
inf = inf
yes = true
no = false
date = 1979-05-27T07:32:00Z
local = 1979-05-27 07:32:00
day = 1979-05-27

[server]
host.name = "example"
host.port = 8080
"quoted key" = 1
'literal key' = 2

[server.tls]
on = false
`);
    expect(doc).toEqual({
      title: 'TOML "x" é\t',
      literal: "C:\\Users\\nope",
      int: 1000,
      hex: 255,
      oct: 15,
      bin: 5,
      big: 9223372036854775807n,
      float: -350,
      inf: Infinity,
      yes: true,
      no: false,
      date: "1979-05-27T07:32:00Z",
      local: "1979-05-27 07:32:00",
      day: "1979-05-27",
      server: { host: { name: "example", port: 8080 }, "quoted key": 1, "literal key": 2, tls: { on: false } },
    });
  });

  it("reads multi-line strings, arrays over several lines and inline tables", () => {
    const doc = parseToml(
      [
        'basic = """',
        "one \\",
        "    two",
        'three ""quoted""',
        '"""',
        "lit = '''",
        "raw \\n stays",
        "'''",
        "list = [",
        '  "a", # first',
        "  'b',",
        "  [1, 2],",
        "]",
        'inline = { a = 1, b.c = "d", e = [true] }',
        "empty = {}",
        "crlf = 1\r",
        "",
      ].join("\n"),
    );
    expect(doc).toEqual({
      basic: 'one two\nthree ""quoted""\n',
      lit: "raw \\n stays\n",
      list: ["a", "b", [1, 2]],
      inline: { a: 1, b: { c: "d" }, e: [true] },
      empty: {},
      crlf: 1,
    });
  });

  it("reads arrays of tables and sub-tables of their entries", () => {
    const doc = parseToml(`
[[product]]
name = "a"
[product.meta]
x = 1
[[product]]
name = "b"
`);
    expect(doc).toEqual({ product: [{ name: "a", meta: { x: 1 } }, { name: "b" }] });
  });

  it("reads a real pyproject.toml", () => {
    const doc = parseToml(`
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "demo"
version = "0.1.0"
dependencies = [
    "flask>=3",
    "gunicorn ; platform_system != 'Windows'",
]
authors = [{ name = "A", email = "a@example.com" }]

[project.optional-dependencies]
dev = ["pytest"]

[tool.ruff.lint]
select = ["E", "F"]
`);
    expect(doc).toMatchObject({
      "build-system": { "build-backend": "setuptools.build_meta" },
      project: { dependencies: ["flask>=3", "gunicorn ; platform_system != 'Windows'"], authors: [{ name: "A" }] },
      tool: { ruff: { lint: { select: ["E", "F"] } } },
    });
  });

  it("keeps __proto__ an ordinary key", () => {
    const doc = parseToml('__proto__ = "x"\n[constructor]\na = 1\n');
    expect(Object.getPrototypeOf(doc)).toBe(Object.prototype);
    expect(Object.keys(doc)).toEqual(["__proto__", "constructor"]);
    expect(({} as Record<string, unknown>).a).toBeUndefined();
  });

  it.each([
    ["a = 1\na = 2", /line 2: "a" is defined twice/],
    ["[t]\n[t]", /line 2: table "t" is defined twice/],
    ["a = 1\n[a]", /line 2: table "a" is defined twice/],
    ["a = {b = 1}\n[a.c]", /line 2: "a" is already defined as a value/],
    ['a = "open', /line 1: unterminated string/],
    ['a = """open', /unterminated multi-line string/],
    ["a = [1, 2", /unterminated array|expected/],
    ["a = {b = 1,\n c = 2}", /inline table must stay on one line/],
    ["a = bare", /"bare" is not a valid value/],
    ["a = 1 b = 2", /after a value/],
    ["= 1", /key/],
    ['a = "\\q"', /unknown escape/],
    ['a = "\\uD800"', /not a Unicode scalar value/],
    ["a = 01", /not a valid value/],
    ["[[a]]\n[a]", /table "a" is defined twice/],
    ["a = [1]\n[[a]]", /not an array of tables/],
    ["a = 'x\u0001'", /control character/],
  ])("refuses %j", (src, message) => {
    expect(() => parseToml(src)).toThrow(TomlError);
    expect(() => parseToml(src)).toThrow(message);
  });
});
