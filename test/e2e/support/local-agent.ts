import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { repo } from "./kit.js";

/**
 * The agent as a process on this machine (the `npm start` local-agent mode), talking to a
 * control plane at `url`. Everything it creates carries `labels` (CAPSTAN_AGENT_LABELS), so
 * cleanup by label finds it. Its stderr tail is printed when it exits with an error.
 */
export function spawnLocalAgent(opts: { url: string; token: string; stateDir: string; labels?: string; env?: Record<string, string> }): ChildProcess {
  const child = spawn(process.execPath, [join(repo, "agent/bin/capstan-agent.js")], {
    env: {
      PATH: process.env.PATH,
      CAPSTAN_URL: opts.url,
      CAPSTAN_AGENT_TOKEN: opts.token,
      CAPSTAN_AGENT_STATE_DIR: opts.stateDir,
      CAPSTAN_AGENT_LABELS: opts.labels ?? "capstan.test=1",
      CAPSTAN_AGENT_LOG_LEVEL: "warn",
      // (w8/rbconfig) e.g. CAPSTAN_AGENT_HELPER_IMAGE for resource restores
      ...opts.env,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let tail = "";
  child.stderr!.on("data", (d: Buffer) => (tail = (tail + d.toString()).slice(-4000)));
  child.on("exit", (code, signal) => {
    if (code) console.error(`agent exited ${code ?? signal}: ${tail}`);
  });
  return child;
}

/** Stops the agent process (SIGTERM: it finishes cleanly; SIGKILL: a crash) and waits for it to exit. */
export async function stopLocalAgent(child: ChildProcess | null, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill(signal);
  });
}
