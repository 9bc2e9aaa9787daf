import { describe, expect, it } from "vitest";
import { HostPath, SENSITIVE_HOST_PATHS, checkHostPath, isForbiddenHostPath, normaliseHostPath } from "./host-path.js";

/** The bypasses an outside review found (issue 15, security 1): each reached a system directory. */
const BYPASSES = [
  "//etc",
  "/var//run/docker.sock",
  "///root/.ssh",
  "/var/lib//docker",
  "/var",
  "/home",
  "/var/spool/cron/crontabs",
  // the same, in further disguises
  "/etc/",
  "/./etc",
  "/srv/../etc",
  "/srv/app/../../etc/shadow",
  "/../../etc",
  "/var/./run//docker.sock/",
  "/run/docker.sock",
  "/home/alice/.ssh",
  "/root",
  "/var/lib/capstan-agent",
  "/var/lib/docker/volumes",
  "/var/lib/containerd",
  "/proc/1/root",
  "/sys/kernel",
  "/dev/sda",
  "/boot",
  "/usr/bin",
  "/bin",
  "/sbin",
  "/lib/modules",
  "/lib64",
  "/var/log/auth.log",
  "/var/backups/shadow.bak",
  "/tmp/tmux-0",
  "/vmlinuz",
  "/initrd.img",
  "/swapfile",
];

/** Ancestors of sensitive directories: mounting them exposes what they contain. */
const ANCESTORS = ["/", "//", "/.", "/..", "/var", "/var/", "/srv/../var", "/srv/.."];

const LEGIT = ["/srv/app/data", "/opt/app", "/data/uploads", "/mnt/disk1/x", "/srv", "/opt", "/mnt", "/media/usb", "/var/www/site", "/srv/capstan/uploads"];

describe("normaliseHostPath", () => {
  it.each([
    ["//etc", "/etc"],
    ["/var//run/docker.sock", "/var/run/docker.sock"],
    ["///root/.ssh", "/root/.ssh"],
    ["/var/lib//docker", "/var/lib/docker"],
    ["/srv/app/", "/srv/app"],
    ["/srv/./app/.", "/srv/app"],
    ["/srv/a/../b", "/srv/b"],
    ["/../..", "/"],
    ["/", "/"],
    ["/srv/..hidden/...", "/srv/..hidden/..."],
  ])("%j -> %j", (raw, normal) => {
    expect(normaliseHostPath(raw)).toBe(normal);
  });

  it("is null for relative paths", () => {
    for (const p of ["etc", "./etc", "../etc", "~/x", ""]) expect(normaliseHostPath(p)).toBeNull();
  });
});

describe("checkHostPath", () => {
  it.each(BYPASSES)("refuses %j (a system directory, in or under one)", (p) => {
    const r = checkHostPath(p);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toMatch(/system directory/);
    expect(isForbiddenHostPath(p)).toBe(true);
  });

  it.each(ANCESTORS)("refuses the ancestor %j", (p) => {
    const r = checkHostPath(p);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toMatch(/contains (every|the) system directory/);
  });

  it("names the directory the path is, lies in, or contains", () => {
    expect(checkHostPath("/etc")).toEqual({ ok: false, reason: "/etc is a system directory and cannot be mounted." });
    expect(checkHostPath("//etc")).toEqual({
      ok: false,
      reason: "//etc resolves to /etc (repeated and trailing slashes, '.' or '..' segments resolved): /etc is a system directory and cannot be mounted.",
    });
    expect(checkHostPath("/var//run/docker.sock")).toMatchObject({ reason: expect.stringMatching(/lies inside the system directory \/var\/run and cannot be mounted\.$/) });
    expect(checkHostPath("/var")).toEqual({ ok: false, reason: "/var contains the system directory /var/backups and cannot be mounted." });
  });

  it.each(LEGIT)("accepts %j and gives its normal form", (p) => {
    expect(checkHostPath(p)).toEqual({ ok: true, path: p });
    expect(checkHostPath(`/${p}/`)).toEqual({ ok: true, path: p });
  });

  it.each([
    ["relative/path", /absolute/],
    ["./data", /absolute/],
    ["~/data", /absolute/],
    ["/srv/a:/etc", /':' or ','/],
    ["/srv/a,b", /':' or ','/],
    ["/srv/a\nb", /control characters/],
    ["/srv/a\u0000b", /control characters/],
    ["/srv/a\u0085b", /control characters/],
    [`/srv/${"x".repeat(1100)}`, /at most 1024/],
  ])("refuses %j", (p, reason) => {
    const r = checkHostPath(p);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toMatch(reason);
  });

  it("refuses the server's own sensitive paths given by the caller (the agent's state dir and socket), normalised too", () => {
    const own = ["/srv/capstan-agent//", "/opt/docker/docker.sock"];
    expect(checkHostPath("/srv/capstan-agent/compose", own)).toMatchObject({ ok: false, reason: expect.stringMatching(/lies inside the system directory \/srv\/capstan-agent/) });
    expect(checkHostPath("/opt/docker", own)).toMatchObject({ ok: false, reason: expect.stringMatching(/contains the system directory \/opt\/docker\/docker.sock/) });
    expect(checkHostPath("/opt/app", own)).toEqual({ ok: true, path: "/opt/app" });
  });

  it("covers the system directories the platform promises to protect", () => {
    for (const d of ["/etc", "/root", "/home", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/var/lib", "/var/spool", "/var/log"]) {
      expect(SENSITIVE_HOST_PATHS).toContain(d);
    }
  });
});

describe("HostPath (zod)", () => {
  it("outputs the normal form, trimmed", () => {
    expect(HostPath.parse(" /srv/capstan/uploads/ ")).toBe("/srv/capstan/uploads");
    expect(HostPath.parse("/srv//app/./data")).toBe("/srv/app/data");
  });

  it("refuses every bypass with the checker's reason", () => {
    for (const p of [...BYPASSES, ...ANCESTORS]) {
      const r = HostPath.safeParse(p);
      expect(r.success, p).toBe(false);
      expect(r.error!.issues[0]!.message).toMatch(/system directory/);
    }
  });
});
