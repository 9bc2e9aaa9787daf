import { describe, expect, it } from "vitest";
import { ownContainerId } from "./self.js";

const ID = "3af927fb4d69" + "0".repeat(52);

describe("ownContainerId", () => {
  it("finds the container id in mountinfo", async () => {
    const mountinfo = [
      "600 590 0:60 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X",
      `612 600 254:1 /var/lib/docker/containers/${ID}/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda1 rw`,
      `613 600 254:1 /var/lib/docker/containers/${ID}/hostname /etc/hostname rw,relatime - ext4 /dev/vda1 rw`,
    ].join("\n");
    expect(await ownContainerId(async (p) => (p === "/proc/self/mountinfo" ? mountinfo : ""))).toBe(ID);
  });

  it("falls back to cgroup v1 paths, and is null on a host", async () => {
    expect(await ownContainerId(async (p) => (p === "/proc/self/cgroup" ? `12:memory:/docker/${ID}\n` : "22 1 0:1 / / rw - ext4 /dev/vda1 rw\n"))).toBe(ID);
    expect(await ownContainerId(async () => "0::/init.scope\n")).toBeNull();
    expect(
      await ownContainerId(async () => {
        throw new Error("ENOENT");
      }),
    ).toBeNull();
  });
});
