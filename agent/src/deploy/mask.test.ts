import { describe, expect, it } from "vitest";
import { createMasker, deploySecrets, MASK } from "./mask.js";

describe("createMasker", () => {
  it("masks every occurrence of values of 4+ characters, longest first", () => {
    const mask = createMasker(["hunter2-secret", "abc", "hunter2"]);
    expect(mask("pw=hunter2-secret and hunter2 and abc")).toBe(`pw=${MASK} and ${MASK} and abc`);
  });

  it("masks multi-line values line by line", () => {
    const key = "-----BEGIN KEY-----\nAAAABBBBCCCC\n-----END KEY-----";
    const mask = createMasker([key]);
    expect(mask("got AAAABBBBCCCC from the key")).toBe(`got ${MASK} from the key`);
  });

  it("leaves text alone without secrets", () => {
    expect(createMasker([])("plain")).toBe("plain");
  });
});

describe("deploySecrets", () => {
  it("collects run env, build env and git token values", () => {
    const secrets = deploySecrets({
      run: { env: { A: "run-value" } },
      build: { env: { B: "build-value" } },
      source: { kind: "git", auth: { kind: "token", username: "x-access-token", token: "ghs_tokenvalue" } },
    } as never);
    expect(secrets).toEqual(["run-value", "build-value", "ghs_tokenvalue"]);
  });
});
