import type { DeployPayload } from "@capstan/shared";
import { describe, expect, it } from "vitest";
import { appContainerSpec } from "./rollout.js";

const payload = (run: Partial<DeployPayload["run"]>): DeployPayload =>
  ({
    deployment_uuid: "dep-0123456789abcdef",
    app: { uuid: "app-1", name: "web" },
    run: { env: {}, ports: [8080], health: null, mounts: [], network: "capstan-env-1", networks: [], ensure_networks: [], proxy_network: null, memory: null, cpus: null, routes: [], ...run },
  }) as unknown as DeployPayload;

describe("appContainerSpec: networks", () => {
  it("creates the container on run.network and labels it with the network the proxy reaches it on", () => {
    const spec = appContainerSpec(payload({ networks: ["capstan-proxy"], proxy_network: "capstan-proxy" }), "img", null, {}, 1);
    expect(spec.network).toBe("capstan-env-1");
    expect(spec.labels["capstan.proxy.network"]).toBe("capstan-proxy");
  });

  it("labels run.network when there is no separate proxy network", () => {
    expect(appContainerSpec(payload({}), "img", null, {}, 1).labels["capstan.proxy.network"]).toBe("capstan-env-1");
  });
});
