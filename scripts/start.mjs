// `npm start`: builds what is not built yet and runs the control plane on an embedded
// SQLite database in ./data (override with PLATFORM_* / DATABASE_URL, see README).
import { spawn, execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
execFileSync(process.execPath, [join(root, "node_modules/turbo/bin/turbo"), "run", "build", "--output-logs=errors-only"], {
  cwd: root,
  stdio: "inherit",
});
const child = spawn(process.execPath, [join(root, "control-plane/bin/capstan.js"), "serve"], {
  cwd: root,
  stdio: "inherit",
  env: { PLATFORM_DATA_DIR: join(root, "data"), ...process.env },
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code) => process.exit(code ?? 0));
