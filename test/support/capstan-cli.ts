import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The `capstan` command as operators run it (control-plane/bin/capstan.js on the built dist),
 * for tests that drive `capstan restore` (issue 19): test/api/platform-backups.test.ts and
 * test/e2e/platform-restore.test.ts.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const BIN = join(ROOT, "control-plane/bin/capstan.js");

/**
 * Runs `capstan ARGS` with `env` over this process's environment minus every setting of an
 * instance (PLATFORM_*, DATABASE_URL, CAPSTAN_RESTORE_*), `stdin` on its standard input.
 */
export function runCapstan(args: string[], env: Record<string, string>, stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("PLATFORM_") && k !== "DATABASE_URL" && !k.startsWith("CAPSTAN_RESTORE_")));
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...base, PLATFORM_LOG_LEVEL: "silent", ...env }, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end(stdin ?? "");
  });
}

/** Builds the control plane's dist (what runCapstan runs); a no-op when it is up to date. */
export function buildControlPlane(): Promise<void> {
  return new Promise<void>((resolve, reject) =>
    execFile("npx", ["tsc", "-b", "control-plane"], { cwd: ROOT, timeout: 180_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${stdout}${stderr}`)) : resolve())),
  );
}
