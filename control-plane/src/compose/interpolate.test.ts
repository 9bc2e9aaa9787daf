import { describe, expect, it } from "vitest";
import { TemplateError, checkTemplate, interpolate, referencesIn, variablesIn } from "./interpolate.js";

describe("compose interpolation", () => {
  const env = { NAME: "web", EMPTY: "", PORT: "3000" };

  it("resolves the forms compose defines", () => {
    expect(interpolate("$NAME-${NAME}", env)).toBe("web-web");
    expect(interpolate("${MISSING}", env)).toBe("");
    expect(interpolate("${MISSING:-dflt} ${EMPTY:-dflt} ${EMPTY-dflt} ${MISSING-dflt}", env)).toBe("dflt dflt  dflt");
    expect(interpolate("${NAME:+alt} ${EMPTY:+alt} ${EMPTY+alt} ${MISSING+alt}", env)).toBe("alt  alt ");
    expect(interpolate("${NAME:?needed}", env)).toBe("web");
  });

  it("nests defaults and keeps $$ as a literal dollar", () => {
    expect(interpolate("${MISSING:-${PORT:-80}}", env)).toBe("3000");
    expect(interpolate("${MISSING:-${ALSO_MISSING:-80}}", env)).toBe("80");
    expect(interpolate("cost: $$5 and $${NAME}", env)).toBe("cost: $5 and ${NAME}");
  });

  it("reports required variables with the author's message", () => {
    expect(() => interpolate("${DB_PASSWORD:?set DB_PASSWORD on the application}", env)).toThrow("variable DB_PASSWORD is required: set DB_PASSWORD on the application");
    expect(() => interpolate("${EMPTY:?}", env)).toThrow(TemplateError);
    expect(interpolate("${EMPTY?}", env)).toBe("");
  });

  it("refuses what compose itself refuses, so a stray $ is never passed on", () => {
    for (const bad of ["price $", "$(id)", "`$1`", "${}", "${1abc}", "${NAME", "${NAME!x}", "${NAME:x}"]) {
      expect(() => checkTemplate(bad), bad).toThrow(TemplateError);
    }
    expect(() => checkTemplate("a ${A:-${B:-${C:-${D:-${E:-${F:-${G:-${H:-${I:-${J}}}}}}}}}}")).toThrow(/nested/);
  });

  it("only ever reads the given map (not process.env)", () => {
    process.env.CAPSTAN_INTERPOLATION_PROBE = "leaked";
    try {
      expect(interpolate("${CAPSTAN_INTERPOLATION_PROBE}|$PATH|${HOME:-none}", {})).toBe("||none");
    } finally {
      delete process.env.CAPSTAN_INTERPOLATION_PROBE;
    }
  });

  it("lists the variables a template refers to", () => {
    expect(variablesIn("$A ${B:-${C}} $$D ${E:?x}").sort()).toEqual(["A", "B", "C", "E"]);
  });
});

describe("referencesIn (template defaults and required inputs)", () => {
  it("lists every reference with its operator, nested ones included, and a plain-text argument", () => {
    expect(referencesIn("postgres://$USER:${PASS:?set a password}@db/${DB:-app} ${A:-${B-x}} $$NOT")).toEqual([
      { name: "USER", op: "", literal: null },
      { name: "PASS", op: ":?", literal: "set a password" },
      { name: "DB", op: ":-", literal: "app" },
      { name: "A", op: ":-", literal: null },
      { name: "B", op: "-", literal: "x" },
    ]);
  });

  it("throws TemplateError for what interpolate refuses", () => {
    expect(() => referencesIn("${A")).toThrow(TemplateError);
  });
});
