import { describe, expect, it } from "vitest";
import { foreignNetworkReason } from "./network-ownership.js";

const labels = (l: Record<string, string>) => ({ labels: l });

describe("foreignNetworkReason: is the engine's network the one a record stands for", () => {
  it("a platform record: only a network with capstan.managed=true and the record's scope", () => {
    for (const scope of ["environment", "shared", "proxy"]) {
      expect(foreignNetworkReason({ name: "n", scope }, labels({ "capstan.managed": "true", "capstan.network.scope": scope }))).toBeNull();
    }
  });

  it("a network made by hand (no capstan.managed=true) is named as such, with what to do", () => {
    const handMade: Record<string, string>[] = [{}, { "capstan.managed": "false" }, { "capstan.network.scope": "shared" }];
    for (const l of handMade) {
      expect(foreignNetworkReason({ name: "team-bus", scope: "shared" }, labels(l))).toBe(
        "a network named team-bus exists on the server that the platform did not create (no capstan.managed=true label); remove or rename it",
      );
    }
  });

  it("a platform network of another scope (or none) is not taken for this record", () => {
    expect(foreignNetworkReason({ name: "capstan-proxy-net", scope: "proxy" }, labels({ "capstan.managed": "true" }))).toBe(
      "a network named capstan-proxy-net exists on the server that the platform did not create as its proxy network (capstan.network.scope is not set); remove or rename it",
    );
    expect(foreignNetworkReason({ name: "bus", scope: "shared" }, labels({ "capstan.managed": "true", "capstan.network.scope": "environment" }))).toMatch(
      /did not create as its shared network \(capstan.network.scope is environment\)/,
    );
  });

  it("system records claim nothing: anything found under their name is theirs", () => {
    expect(foreignNetworkReason({ name: "bridge", scope: "system" }, labels({}))).toBeNull();
  });
});
