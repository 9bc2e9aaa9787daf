import { readFile } from "node:fs/promises";

const ID = /[0-9a-f]{64}/;

/**
 * The id of the container this process runs in, or null when it runs on the host. Docker
 * bind-mounts /etc/hostname, /etc/hosts and /etc/resolv.conf from
 * <data-root>/containers/<id>/, which shows in mountinfo (cgroup v1 paths as a fallback).
 */
export async function ownContainerId(read: (path: string) => Promise<string> = (p) => readFile(p, "utf8")): Promise<string | null> {
  try {
    const mountinfo = await read("/proc/self/mountinfo");
    for (const line of mountinfo.split("\n")) {
      const m = /\/containers\/([0-9a-f]{64})\/(hostname|hosts|resolv\.conf)\b/.exec(line);
      if (m?.[1]) return m[1];
    }
  } catch {
    // not Linux, or no procfs
  }
  try {
    const cgroup = await read("/proc/self/cgroup");
    const m = /\/docker[/-]([0-9a-f]{64})/.exec(cgroup);
    if (m?.[1] && ID.test(m[1])) return m[1];
  } catch {
    // ignore
  }
  return null;
}
