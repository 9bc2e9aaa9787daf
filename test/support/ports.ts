import { createServer } from "node:net";
import { readFileSync } from "node:fs";
import { open, readFile, unlink, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Ports for listeners the tests start later: a control plane, the proxy container's host
 * bindings, a git server.
 *
 * Asking the kernel for a free ephemeral port and binding it later is racy here. Outgoing
 * connections and Docker's dynamic host ports (`-p 127.0.0.1::80`) are taken from the same
 * ephemeral range, so either can take the port before the listener starts ("port is already
 * allocated"). These ports come from below that range, where neither ever picks.
 *
 * Suites run in parallel processes, so a port is also claimed with an exclusive file. The file
 * is held for the whole life of the process. A claim whose process has died is taken over.
 */
const FLOOR = 20_000;
export const CLAIMS = join(tmpdir(), "capstan-test-ports");

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > FLOOR + 1_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

export const FLOOR_PORT = FLOOR;
export const CEILING = ephemeralLow() - 1;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Claims the port for this process. Returns false when a live process holds it. */
export async function claim(port: number): Promise<boolean> {
  const file = join(CLAIMS, String(port));
  for (let tries = 0; tries < 2; tries++) {
    try {
      const fh = await open(file, "wx");
      await fh.writeFile(String(process.pid));
      await fh.close();
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const holder = Number((await readFile(file, "utf8").catch(() => "")).trim());
      // An empty file is a claim being written right now: leave it to its writer.
      if (!holder || alive(holder)) return false;
      await unlink(file).catch(() => {});
    }
  }
  return false;
}

/** Nothing listens on the port on any address right now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen({ port, host: "0.0.0.0", exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/** A port nothing listens on, outside the ephemeral range, claimed by no other test process. */
export async function freePort(): Promise<number> {
  await mkdir(CLAIMS, { recursive: true });
  for (let i = 0; i < 200; i++) {
    const port = FLOOR + Math.floor(Math.random() * (CEILING - FLOOR + 1));
    if (!(await bindable(port))) continue;
    if (await claim(port)) return port;
  }
  throw new Error(`no free port between ${FLOOR} and ${CEILING} after 200 tries`);
}
