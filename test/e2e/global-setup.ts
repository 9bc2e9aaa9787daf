import { spawn } from "node:child_process";
import { once } from "node:events";
import { sh, repo } from "./support/kit.js";
import { join } from "node:path";

/**
 * Every e2e run on this engine holds a shared lock for its lifetime, and the catch-all
 * cleanup by the `capstan.test=1` label runs only when no other run holds it: several
 * checkouts may share one engine, and one run's teardown must not remove another run's
 * hosts. The last run to finish cleans up; each test file removes its own objects anyway.
 */
const LOCK = process.env.CAPSTAN_E2E_LOCK ?? "/tmp/capstan-e2e-runs.lock";
const BUSY = 75;

async function holdSharedLock(): Promise<() => Promise<void>> {
  const holder = spawn("flock", ["-s", LOCK, "sh", "-c", "echo held; exec cat"], { stdio: ["pipe", "pipe", "inherit"] });
  const [first] = (await Promise.race([once(holder.stdout, "data"), once(holder, "exit")])) as [Buffer | number];
  if (!Buffer.isBuffer(first)) throw new Error(`could not take the e2e run lock ${LOCK}`);
  return async () => {
    const exited = once(holder, "exit");
    holder.stdin.end();
    await exited;
  };
}

/**
 * Once per run: tools, a real Docker Engine (installed and started when the machine has
 * none), the local base images, and the agent and proxy images built from this checkout.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const release = await holdSharedLock();
  await sh("bash", [join(repo, "test/kit/prepare.sh")]);
  return async () => {
    await release();
    const cleanup = spawn("flock", ["-n", "-E", String(BUSY), "-x", LOCK, "bash", join(repo, "test/kit/cleanup.sh")], { stdio: "inherit" });
    const [code] = (await once(cleanup, "exit")) as [number | null];
    if (code === BUSY) console.log("e2e teardown: another run shares this engine; the last run to end cleans up");
    else if (code !== 0) throw new Error(`test/kit/cleanup.sh exited with ${code}`);
  };
}
