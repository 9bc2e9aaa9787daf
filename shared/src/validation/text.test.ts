import { describe, expect, it } from "vitest";
import { z } from "zod";
import { controlCharacterIssues, multiline } from "./text.js";

const Body = z.strictObject({
  name: z.string().trim(),
  description: multiline(z.string().max(10)).optional(),
  variables: z.array(z.object({ key: z.string(), value: multiline(z.string()) })).optional(),
  labels: z.record(z.string(), z.string()).optional(),
  either: z.union([multiline(z.string()), z.number()]).optional(),
  fqdn: z.string().transform((v) => v.split(",")).optional(),
  later: z.preprocess((v) => v, multiline(z.string())).optional(),
});

const paths = (value: unknown) => controlCharacterIssues(Body, value).map((i) => i.path.join("."));

describe("controlCharacterIssues", () => {
  it("refuses every C0, DEL and C1 control in single-line strings", () => {
    for (let c = 0; c <= 0x9f; c++) {
      const ch = String.fromCharCode(c);
      const bad = c < 0x20 || (c >= 0x7f && c <= 0x9f);
      expect(paths({ name: `a${ch}b` }), `U+${c.toString(16)}`).toEqual(bad ? ["name"] : []);
    }
  });

  it("allows tab, LF and CR (only) in fields marked multiline, at any depth and through wrappers", () => {
    for (const ch of ["\t", "\n", "\r"]) {
      expect(paths({ name: "x", description: `a${ch}b`, variables: [{ key: "K", value: `1${ch}2` }], either: `a${ch}`, later: `a${ch}b` })).toEqual([]);
      expect(paths({ name: `x${ch}` })).toEqual(["name"]);
    }
    for (const ch of ["\u0000", "\u0001", "\u001b", "\u007f", "\u0085", "\u009f"]) {
      expect(paths({ name: "x", description: `a${ch}`, variables: [{ key: "K", value: `1${ch}` }], later: ch })).toEqual(["description", "variables.0.value", "later"]);
    }
  });

  it("checks strings the schema does not know, record values, keys, and transformed fields by their raw value", () => {
    expect(paths({ unknown: "a\nb", labels: { k: "v\n" }, fqdn: "a.example.com\nb.example.com" })).toEqual(["unknown", "labels.k", "fqdn"]);
    expect(paths({ ["bad\u0000key"]: 1 })).toEqual(["bad\u0000key"]);
    expect(controlCharacterIssues(undefined, { a: ["x", { b: "\u0000" }] }).map((i) => i.path)).toEqual([["a", 1, "b"]]);
    expect(controlCharacterIssues(undefined, "top\u0000").map((i) => i.path)).toEqual([[]]);
  });

  it("takes field names like __proto__ and constructor as plain names (found by the route fuzz: a 500 before)", () => {
    const parsed = JSON.parse('{"__proto__": {"a": "x\\u0000"}, "constructor": "y\\n", "toString": 1, "name": "ok"}') as unknown;
    expect(paths(parsed)).toEqual(["__proto__.a", "constructor"]);
    expect(controlCharacterIssues(Body, JSON.parse('{"__proto__": "v", "constructor": "w"}'))).toEqual([]);
  });

  it("walks deeply nested values without recursion and reports at most 20 issues", () => {
    let deep: unknown = "\u0000";
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(controlCharacterIssues(undefined, deep)).toHaveLength(1);
    expect(controlCharacterIssues(undefined, Array.from({ length: 1000 }, () => "\u0000"))).toHaveLength(20);
  });
});
