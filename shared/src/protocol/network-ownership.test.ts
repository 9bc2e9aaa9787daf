import { describe, expect, it } from "vitest";
import { networkOwnership } from "./networks.js";

describe("networkOwnership: the one rule both ends hold an existing network to", () => {
  it("takes a platform network of the scope asked for, or of any scope when none is asked", () => {
    const labels = { "capstan.managed": "true", "capstan.network.scope": "shared" };
    expect(networkOwnership(labels, "shared")).toEqual({ ok: true });
    expect(networkOwnership(labels, null)).toEqual({ ok: true });
  });

  it("refuses a network made by hand, whatever its scope label says", () => {
    expect(networkOwnership({ "capstan.network.scope": "shared" }, "shared")).toEqual({ ok: false, madeByPlatform: false });
    expect(networkOwnership({ "capstan.managed": "yes" }, null)).toEqual({ ok: false, madeByPlatform: false });
  });

  it("refuses a platform network of another scope, or of none, naming what it carries", () => {
    expect(networkOwnership({ "capstan.managed": "true", "capstan.network.scope": "environment" }, "proxy")).toEqual({ ok: false, madeByPlatform: true, scope: "environment" });
    expect(networkOwnership({ "capstan.managed": "true" }, "shared")).toEqual({ ok: false, madeByPlatform: true, scope: null });
  });
});
