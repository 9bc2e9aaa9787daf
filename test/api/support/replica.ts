import { createHttpServer } from "../../../control-plane/src/http/listener.js";
import type { Socket } from "node:net";
import { pino } from "pino";
import { recentLogStream } from "./recent-log.js";
import type { Config } from "../../../control-plane/src/config.js";
import { createInstance, type Instance } from "../../../control-plane/src/instance.js";
import { client, type ApiClient, type TestInstance } from "../harness.js";

export interface Replica {
  url: string;
  instance: Instance;
  api(token?: string): ApiClient;
  close(): Promise<void>;
}

/**
 * A second control plane on the database of `t` (another replica of the same deployment), with
 * some settings changed if asked. On PostgreSQL this is the scale-out setup; on SQLite both
 * processes' worth of clients share one file (WAL), which is enough for the API paths tested.
 */
export async function startReplica(t: TestInstance, overrides: Partial<Config> = {}): Promise<Replica> {
  const instance = await createInstance({ ...t.config, ...overrides }, pino({ level: "warn" }, recentLogStream()));
  const server = createHttpServer(instance.app);
  const sockets = new Set<Socket>();
  server.on("connection", (s) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  await instance.attach(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const addr = server.address();
  const url = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
  return {
    url,
    instance,
    api: (token?: string) => client(url + "/api/v1", token),
    async close() {
      for (const s of sockets) s.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await instance.close();
    },
  };
}
