import { spawn } from "node:child_process";

export interface RunOptions {
  cwd?: string;
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
  /** Hard cap for this one command, on top of signal. */
  timeoutMs: number;
  /** Each line git writes to stderr (progress and errors), split on \r and \n. */
  onLine?: (line: string) => void;
}

export interface RunResult {
  code: number | null;
  stdout: string;
  /** The last lines of stderr, for telling failures apart. */
  stderrTail: string[];
  /** "aborted" (signal) or "timeout" when the process was killed by us. */
  killed: "aborted" | "timeout" | null;
}

const STDOUT_CAP = 1024 * 1024;
const TAIL_LINES = 60;

/**
 * Runs argv without a shell in its own process group, so that aborting kills git and
 * everything it started (ssh, git-remote-https, index-pack), not just the parent.
 */
export function run(cmd: string, argv: string[], opts: RunOptions): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    if (opts.signal.aborted) return resolve({ code: null, stdout: "", stderrTail: [], killed: "aborted" });
    const child = spawn(cmd, argv, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
      shell: false,
    });
    let stdout = "";
    const tail: string[] = [];
    let partial = "";
    let killed: RunResult["killed"] = null;

    const kill = (why: "aborted" | "timeout") => {
      if (killed || child.exitCode !== null || child.pid === undefined) return;
      killed = why;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    };
    const onAbort = () => kill("aborted");
    opts.signal.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => kill("timeout"), opts.timeoutMs);

    const line = (l: string) => {
      const t = l.trimEnd();
      if (!t) return;
      tail.push(t);
      if (tail.length > TAIL_LINES) tail.shift();
      opts.onLine?.(t);
    };
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d: string) => {
      if (stdout.length < STDOUT_CAP) stdout += d;
    });
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d: string) => {
      const parts = (partial + d).split(/\r\n|\r|\n/);
      partial = parts.pop() ?? "";
      parts.forEach(line);
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      opts.signal.removeEventListener("abort", onAbort);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      opts.signal.removeEventListener("abort", onAbort);
      if (partial) line(partial);
      resolve({ code, stdout, stderrTail: tail, killed });
    });
  });
}
