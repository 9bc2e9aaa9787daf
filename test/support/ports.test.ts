import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { access, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CEILING, CLAIMS, FLOOR_PORT, claim, freePort } from "./ports.js";

const listenOn = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "0.0.0.0", () => s.close(() => resolve(true)));
  });

describe("freePort", () => {
  it("gives distinct ports below the ephemeral range that can be bound on every address", async () => {
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    expect(new Set(ports).size).toBe(ports.length);
    for (const p of ports) {
      expect(p).toBeGreaterThanOrEqual(FLOOR_PORT);
      expect(p).toBeLessThanOrEqual(CEILING);
      expect(await listenOn(p)).toBe(true);
      expect(await readFile(join(CLAIMS, String(p)), "utf8")).toBe(String(process.pid));
    }
  });

  it("a port claimed by a live process stays its own; a dead process's claim is taken over", async () => {
    const port = await freePort();
    expect(await claim(port)).toBe(false);

    const dead = spawnSync(process.execPath, ["-e", ""]).pid;
    expect(dead).toBeGreaterThan(0);
    await mkdir(CLAIMS, { recursive: true });
    // A port nobody claims, so that writing its claim file takes nothing from a running suite.
    let other = port;
    do other = FLOOR_PORT + ((other - FLOOR_PORT + 1) % (CEILING - FLOOR_PORT + 1));
    while (await access(join(CLAIMS, String(other))).then(() => true, () => false));
    await writeFile(join(CLAIMS, String(other)), String(dead));
    expect(await claim(other)).toBe(true);
    expect(await readFile(join(CLAIMS, String(other)), "utf8")).toBe(String(process.pid));
  });
});
