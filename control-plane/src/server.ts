import { type IncomingMessage, type RequestListener, type Server, type ServerResponse } from "node:http";
import type { Config } from "./config.js";
import { createLogger } from "./lib/log.js";
import type { Instance } from "./instance.js";
import { openGatewayDoor } from "./agents/door.js";
import { createHttpServer } from "./http/listener.js";

/** Stops accepting connections, lets in-flight requests finish (bounded), then closes. */
function closeGracefully(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.closeAllConnections();
      resolve();
    }, timeoutMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** Connections queued by the kernel before they are accepted (capped by net.core.somaxconn). */
const LISTEN_BACKLOG = 4096;

/** Until the control plane is ready, every request (/healthz and /readyz too) gets a 503. */
function starting(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "1" });
  res.end(JSON.stringify({ message: "The control plane is starting." }));
}

export async function serve(config: Config): Promise<void> {
  const log = createLogger(config.logLevel);
  // Listen first, with agents' handshakes held at the door (agents/door.ts), then load and open
  // everything else: a restarted control plane is reachable within a moment, so its fleet
  // reconnects before the agents' backoff has grown (docs/agents.md).
  let app: RequestListener | null = null;
  const server = createHttpServer((req, res) => (app ? app(req, res) : starting(req, res)));
  const door = openGatewayDoor(server);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    // While the rest loads the event loop is busy: a fleet's connections wait in the kernel's
    // accept queue (Node's default of 511 would drop the rest, and each drop costs a retry).
    server.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG }, () => resolve());
  });
  let instance: Instance;
  try {
    const { createInstance } = await import("./instance.js");
    instance = await createInstance(config, log);
    if (instance.migrationsApplied.length) log.info({ migrations: instance.migrationsApplied }, "database migrated");
    const rootToken = await instance.admin.bootstrapRoot(config.rootEmail);
    if (rootToken) {
      // Printed once, outside the JSON log stream, and never stored.
      process.stdout.write(
        `\nCapstan first start: created "Root Team" and its owner ${config.rootEmail}.\n` +
          `Root API token (read, write, deploy), shown only now:\n\n  ${rootToken}\n\n`,
      );
    }
    await instance.attach(server, door);
  } catch (err) {
    // Could not start (configuration, database, key): close the door and the port, then fail.
    server.closeAllConnections();
    await new Promise<void>((r) => door.io.close(() => r()));
    throw err;
  }
  app = instance.app;
  log.info({ port: config.port, host: config.host, database: config.database.kind }, "capstan control plane listening");

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    instance.gateway?.disconnectAll();
    await closeGracefully(server, config.shutdownTimeoutMs);
    await instance.close();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}
