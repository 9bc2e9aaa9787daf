import type Docker from "dockerode";
import { describe, expect, it } from "vitest";
import { networkDetailsOf, swarmRoleOf } from "./dockerode-engine.js";

describe("swarmRoleOf", () => {
  it("reads manager / worker / inactive from the engine's Swarm section", () => {
    expect(swarmRoleOf({ LocalNodeState: "active", ControlAvailable: true })).toBe("manager");
    expect(swarmRoleOf({ LocalNodeState: "active", ControlAvailable: false })).toBe("worker");
    expect(swarmRoleOf({ LocalNodeState: "inactive", ControlAvailable: false })).toBe("inactive");
    // Joining, or in error: not usable for overlays yet.
    expect(swarmRoleOf({ LocalNodeState: "pending" })).toBe("inactive");
    expect(swarmRoleOf({ LocalNodeState: "error", ControlAvailable: true })).toBe("inactive");
    expect(swarmRoleOf(undefined)).toBeNull();
    expect(swarmRoleOf({})).toBeNull();
  });
});

describe("networkDetailsOf", () => {
  it("takes the first IPv4 pool, strips prefix lengths, and leaves swarm load-balancer endpoints out", () => {
    const inspect = {
      Name: "o",
      Id: "abc",
      Created: "2026-01-01T00:00:00Z",
      Scope: "swarm",
      Driver: "overlay",
      EnableIPv6: true,
      Internal: false,
      Attachable: true,
      IPAM: { Driver: "default", Config: [{ Subnet: "fd00::/64", Gateway: "fd00::1" }, { Subnet: "10.0.1.0/24", Gateway: "10.0.1.1" }] },
      Containers: {
        "c2id": { Name: "zeta", EndpointID: "e2", MacAddress: "", IPv4Address: "10.0.1.3/24", IPv6Address: "" },
        "c1id": { Name: "alpha", EndpointID: "e1", MacAddress: "", IPv4Address: "", IPv6Address: "fd00::2/64" },
        "lb-o": { Name: "o-endpoint", EndpointID: "e3", MacAddress: "", IPv4Address: "10.0.1.4/24", IPv6Address: "" },
      },
      Options: { "com.docker.network.driver.overlay.vxlanid_list": "4097", encrypted: "" },
      Labels: { "capstan.managed": "true" },
    } as unknown as Docker.NetworkInspectInfo;
    expect(networkDetailsOf(inspect)).toEqual({
      id: "abc",
      name: "o",
      driver: "overlay",
      created: "2026-01-01T00:00:00Z",
      labels: { "capstan.managed": "true" },
      scope: "swarm",
      internal: false,
      attachable: true,
      options: { "com.docker.network.driver.overlay.vxlanid_list": "4097", encrypted: "" },
      subnet: "10.0.1.0/24",
      gateway: "10.0.1.1",
      containers: [
        { id: "c1id", name: "alpha", ipv4: null },
        { id: "c2id", name: "zeta", ipv4: "10.0.1.3" },
      ],
    });
  });

  it("reports no subnet for a network without IPAM config (host, none)", () => {
    const d = networkDetailsOf({ Name: "host", Id: "h", Created: "", Scope: "local", Driver: "host", IPAM: { Driver: "default", Config: [] }, Containers: {}, Options: {}, Labels: {} } as unknown as Docker.NetworkInspectInfo);
    expect(d).toMatchObject({ subnet: null, gateway: null, containers: [], internal: false, attachable: false });
  });
});
