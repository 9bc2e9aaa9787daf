import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { Invalid } from "../domain/errors.js";
import { LABEL_OVERRIDE_LIMITS, applyLabelOverrides, mergeLabels, parseLabelOverrides } from "./label-overrides.js";

const reasons = (yaml: string): string[] => {
  try {
    parseLabelOverrides(yaml);
  } catch (err) {
    expect(err).toBeInstanceOf(Invalid);
    return (err as Invalid).errors.yaml ?? [];
  }
  throw new Error("expected Invalid");
};

describe("parseLabelOverrides", () => {
  it("reads a map of label to value; scalars become strings, null an empty value", () => {
    const yaml = ["proxy.basic_auth.alice: $2a$14$DIIWF53dTevBGU1c3SKBo.wsBBcRn6psfVF0/8dXg78yyEgdkzm4e", "proxy.encode: gzip", "com.example.replicas: 3", "com.example.on: true", "com.example.empty:", ""].join("\n");
    expect(parseLabelOverrides(yaml)).toEqual({
      labels: {
        "proxy.basic_auth.alice": "$2a$14$DIIWF53dTevBGU1c3SKBo.wsBBcRn6psfVF0/8dXg78yyEgdkzm4e",
        "proxy.encode": "gzip",
        "com.example.replicas": "3",
        "com.example.on": "true",
        "com.example.empty": "",
      },
      dropped: [],
    });
  });

  it("drops keys with the reserved prefixes (any case) and says which", () => {
    const r = parseLabelOverrides("capstan.proxy.routes: '[]'\nCapstan.Managed: 'false'\ncom.docker.compose.project: x\ncapstan.proxy.network: n\nproxy.network: n\n");
    expect(r).toEqual({ labels: { "proxy.network": "n" }, dropped: ["capstan.proxy.routes", "Capstan.Managed", "com.docker.compose.project", "capstan.proxy.network"] });
  });

  it("reads empty text, or only comments, as no overrides", () => {
    expect(parseLabelOverrides("")).toEqual({ labels: {}, dropped: [] });
    expect(parseLabelOverrides("# nothing yet\n")).toEqual({ labels: {}, dropped: [] });
  });

  it("refuses what is not a flat map of scalars", () => {
    expect(reasons("- a\n- b\n")).toEqual(["use a map of label: value"]);
    expect(reasons("just text")).toEqual(["use a map of label: value"]);
    expect(reasons("a:\n  nested: 1\n")).toEqual(["a: use a string, number or boolean"]);
    expect(reasons("a: [1, 2]\n")).toEqual(["a: use a string, number or boolean"]);
  });

  it("refuses bad keys, duplicate keys, YAML errors, aliases and tags", () => {
    expect(reasons('"bad key": 1\n')[0]).toMatch(/is not a valid label key/);
    expect(reasons("a: 1\na: 2\n")[0]).toMatch(/^YAML: /);
    expect(reasons("a: [unclosed\n")[0]).toMatch(/^YAML: /);
    expect(reasons("a: &x v\nb: *x\n")).toEqual(["YAML aliases are not supported here"]);
    expect(reasons("a: !!binary aGk=\n")[0]).toMatch(/tag/);
    expect(reasons("a: !custom v\n")[0]).toMatch(/tag/);
    expect(reasons("a: 1\n---\nb: 2\n")[0]).toMatch(/^YAML: /);
  });

  it("bounds the text, the number of labels and each value", () => {
    expect(reasons(`a: ${"x".repeat(LABEL_OVERRIDE_LIMITS.bytes)}\n`)[0]).toMatch(/bytes; the limit is/);
    expect(reasons(`a: ${"x".repeat(LABEL_OVERRIDE_LIMITS.valueChars + 1)}\n`)).toEqual([`a: the value is ${LABEL_OVERRIDE_LIMITS.valueChars + 1} characters; the limit is ${LABEL_OVERRIDE_LIMITS.valueChars}`]);
    const many = Array.from({ length: LABEL_OVERRIDE_LIMITS.labels + 1 }, (_, i) => `l${i}: v`).join("\n");
    expect(reasons(many)).toEqual([`at most ${LABEL_OVERRIDE_LIMITS.labels} labels`]);
    expect(reasons("a: \u0000\n")[0]).toMatch(/NUL/);
  });

  it("keeps hostile values as literal text (newlines, placeholders, variables): the proxy checks them when it reads them", () => {
    const r = parseLabelOverrides('proxy.headers.response.X-A: "one\\ntwo"\nproxy.headers.response.X-B: "{env.SECRET}"\nproxy.headers.response.X-C: "$HOME"\n');
    expect(r.labels).toEqual({ "proxy.headers.response.X-A": "one\ntwo", "proxy.headers.response.X-B": "{env.SECRET}", "proxy.headers.response.X-C": "$HOME" });
  });
});

describe("mergeLabels", () => {
  it("puts the user's labels over the generated ones: the user wins a collision", () => {
    expect(mergeLabels({ "capstan.managed": "true", "com.example.tier": "gen", keep: "1" }, { "com.example.tier": "user", "proxy.encode": "gzip" })).toEqual({
      "capstan.managed": "true",
      "com.example.tier": "user",
      keep: "1",
      "proxy.encode": "gzip",
    });
  });

  it("never lets a reserved key replace the platform's, even unparsed", () => {
    expect(mergeLabels({ "capstan.managed": "true" }, { "capstan.managed": "false", "CAPSTAN.resource.uuid": "x" })).toEqual({ "capstan.managed": "true" });
  });
});

// w5/svcextras: the service render path
describe("applyLabelOverrides", () => {
  const compose = "services:\n  web:\n    image: nginx:1.27\n    labels:\n      - com.example.tier=generated\n      - com.example.keep=kept\n  db:\n    image: postgres:16\n";

  it("leaves a file without overrides byte for byte as it was", () => {
    expect(applyLabelOverrides(compose, {})).toBe(compose);
    expect(applyLabelOverrides(compose, { web: {} })).toBe(compose);
  });

  it("merges over list-form labels (the user wins), escapes $, never sets a reserved key, skips unknown services", () => {
    const out = parse(applyLabelOverrides(compose, { web: { "com.example.tier": "user", "proxy.headers.response.X-A": "a$b", "capstan.managed": "false" }, db: { x: "1" }, gone: { y: "2" } }));
    expect(out.services.web.labels).toEqual({ "com.example.tier": "user", "com.example.keep": "kept", "proxy.headers.response.X-A": "a$$b" });
    expect(out.services.db.labels).toEqual({ x: "1" });
    expect(out.services.gone).toBeUndefined();
  });
});
