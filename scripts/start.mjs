// `npm start`: builds what is not built yet, runs the control plane on an embedded SQLite
// database in ./data, and an agent for this machine (the "localhost" server of the root
// team). PLATFORM_* / DATABASE_URL override the defaults (README); PLATFORM_LOCAL_AGENT=false
// runs the control plane alone.
import { spawn, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const env = { PLATFORM_DATA_DIR: join(root, "data"), ...process.env };
const port = Number(env.PLATFORM_PORT ?? 8000);
const cli = join(root, "control-plane/bin/capstan.js");
const agentBin = join(root, "agent/bin/capstan-agent.js");

execFileSync(process.execPath, [join(root, "node_modules/turbo/bin/turbo"), "run", "build", "--output-logs=errors-only"], {
  cwd: root,
  stdio: "inherit",
});

const children = [];
const stopAll = (sig) => children.forEach((c) => c.exitCode === null && c.kill(sig));
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => stopAll(sig));

const server = spawn(process.execPath, [cli, "serve"], { cwd: root, stdio: "inherit", env });
children.push(server);
server.on("exit", (code) => {
  stopAll("SIGTERM");
  process.exit(code ?? 0);
});

async function ready() {
  for (let i = 0; i < 120; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) return true;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

/** The engine socket the local agent will use (its own rule: DOCKER_SOCKET, else a unix:// DOCKER_HOST). */
function engineSocket() {
  const strip = (v) => (v.startsWith("unix://") ? v.slice("unix://".length) : v);
  if (env.DOCKER_SOCKET) return strip(env.DOCKER_SOCKET);
  if (env.DOCKER_HOST?.startsWith("unix://")) return strip(env.DOCKER_HOST);
  return "/var/run/docker.sock";
}

if (env.PLATFORM_LOCAL_AGENT !== "false" && existsSync(agentBin)) {
  // A newcomer without Docker: say once, in plain words, what is missing and how to get it.
  // The agent starts anyway: it checks again with backoff and picks the engine up once it is there.
  const socket = engineSocket();
  if (!existsSync(socket)) {
    console.error(
      [
        `capstan: no Docker Engine found at ${socket}.`,
        '  The control plane runs, but the server "localhost" cannot run anything until a Docker Engine is there:',
        "  install one and start it (Debian/Ubuntu: apt-get install docker.io; others: https://docs.docker.com/engine/install/),",
        "  or point DOCKER_HOST at one (DOCKER_HOST=unix:///path/to/docker.sock npm start).",
        "  The local agent keeps looking (backing off to once a minute); GET /api/v1/servers/{uuid} says why the server is not usable.",
      ].join("\n"),
    );
  }
  if (!(await ready())) {
    console.error("capstan: the control plane did not become ready; not starting the local agent");
  } else {
    const token = execFileSync(process.execPath, [cli, "local-agent-token"], { cwd: root, env, encoding: "utf8" }).trim();
    const agent = spawn(process.execPath, [agentBin], {
      cwd: root,
      stdio: "inherit",
      env: {
        ...process.env,
        CAPSTAN_URL: `http://127.0.0.1:${port}`,
        CAPSTAN_AGENT_TOKEN: token,
        CAPSTAN_AGENT_STATE_DIR: join(env.PLATFORM_DATA_DIR, "agent"),
      },
    });
    children.push(agent);
    console.log(`capstan: local agent started for server "localhost" (state in ${join(env.PLATFORM_DATA_DIR, "agent")})`);
  }
}
