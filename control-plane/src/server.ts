import { createServer, type Server } from "node:http";
import type { Config } from "./config.js";
import { createLogger } from "./lib/log.js";
import { createInstance } from "./instance.js";

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

export async function serve(config: Config): Promise<void> {
  const log = createLogger(config.logLevel);
  const instance = await createInstance(config, log);
  if (instance.migrationsApplied.length) log.info({ migrations: instance.migrationsApplied }, "database migrated");
  const rootToken = await instance.admin.bootstrapRoot(config.rootEmail);
  if (rootToken) {
    // Printed once, outside the JSON log stream, and never stored.
    process.stdout.write(
      `\nCapstan first start: created "Root Team" and its owner ${config.rootEmail}.\n` +
        `Root API token (read, write, deploy), shown only now:\n\n  ${rootToken}\n\n`,
    );
  }
  const server = createServer(instance.app);
  server.keepAliveTimeout = 65_000;
  await instance.attach(server);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => resolve());
  });
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
