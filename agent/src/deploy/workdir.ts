import { mkdir, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";

/** Work dirs older than this were left by an agent that died mid-build: no deploy runs that long. */
const STALE_MS = 6 * 3600_000;

async function sweepStale(parent: string): Promise<void> {
  const now = Date.now();
  for (const name of await readdir(parent).catch(() => [] as string[])) {
    const path = join(parent, name);
    const st = await stat(path).catch(() => null);
    if (st && now - st.mtimeMs > STALE_MS) await rm(path, { recursive: true, force: true }).catch(() => {});
  }
}

/**
 * A private (mode 700) scratch directory for one deployment under the agent's state dir:
 * clones and build contexts live there, never in a shared /tmp. Removed by dispose().
 */
export async function createWorkDir(stateDir: string, deploymentUuid: string): Promise<{ path: string; dispose(): Promise<void> }> {
  const parent = join(stateDir, "builds");
  await mkdir(parent, { recursive: true, mode: 0o700 });
  await sweepStale(parent);
  const path = await mkdtemp(join(parent, `${deploymentUuid.slice(0, 36)}-`));
  return {
    path,
    dispose: () => rm(path, { recursive: true, force: true, maxRetries: 3 }),
  };
}
