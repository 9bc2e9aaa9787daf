import type { Server } from "node:http";
import type { Socket } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { freshPostgresDatabase } from "./support/database.js";
import { pino } from "pino";
import { recentLogStream } from "./support/recent-log.js";
import { loadConfig, type Config } from "../../control-plane/src/config.js";
import { createInstance, type Instance } from "../../control-plane/src/instance.js";
import { createHttpServer } from "../../control-plane/src/http/listener.js";
import type { TeamRole, TokenScope } from "@capstan/shared";

/**
 * A real control plane on a real database, listening on loopback. The database is SQLite
 * in a temp dir, or a fresh PostgreSQL database when CAPSTAN_TEST_PG_URL names a server
 * (CI runs the API suite both ways).
 */
export interface TestInstance {
  url: string;
  config: Config;
  instance: Instance;
  rootToken: string;
  rootTeamId: number;
  api(token?: string): ApiClient;
  /** A new team with an owner and a full-scope token (what `capstan team create` + `token create` give). */
  newTeam(name?: string): Promise<TeamFixture>;
  /** Adds a user with the role to the team and gives it a token with the scopes. */
  newMember(teamId: number, role: TeamRole, scopes?: TokenScope[]): Promise<{ userId: number; token: string }>;
  /**
   * Stops the control plane (connections dropped, like a crash of the process) and starts it
   * again on the same port; `env` changes settings for the new start (another PLATFORM_DATA_DIR
   * and DATABASE_URL: another instance at the same address); `whileDown` runs while it is stopped.
   */
  restart(downMs?: number, env?: Record<string, string>, whileDown?: () => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

export interface TeamFixture {
  teamId: number;
  ownerId: number;
  token: string;
  api: ApiClient;
}

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface ApiClient {
  get<T = any>(path: string, query?: Record<string, string | number>): Promise<ApiResponse<T>>;
  post<T = any>(path: string, body?: unknown): Promise<ApiResponse<T>>;
  patch<T = any>(path: string, body?: unknown): Promise<ApiResponse<T>>;
  put<T = any>(path: string, body?: unknown): Promise<ApiResponse<T>>;
  delete<T = any>(path: string, body?: unknown): Promise<ApiResponse<T>>;
  raw(path: string, init: RequestInit): Promise<ApiResponse>;
}

export function client(baseUrl: string, token?: string): ApiClient {
  const raw = async (path: string, init: RequestInit): Promise<ApiResponse> => {
    const headers = new Headers(init.headers);
    headers.set("Accept", "application/json");
    if (token && !headers.has("Authorization")) headers.set("Authorization", `Bearer ${token}`);
    const res = await fetch(baseUrl + path, { ...init, headers });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      /* non-JSON bodies stay text: tests assert on that */
    }
    return { status: res.status, body, headers: res.headers };
  };
  const withBody = (method: string) => (path: string, body?: unknown) =>
    raw(path, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "Content-Type": "application/json" } }),
    });
  return {
    get: (path, query) => raw(query ? `${path}?${new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]))}` : path, { method: "GET" }),
    post: withBody("POST"),
    patch: withBody("PATCH"),
    put: withBody("PUT"),
    delete: withBody("DELETE"),
    raw,
  };
}

export interface StartOptions {
  /** Listen address; e2e tests listen where their test hosts can reach them. */
  host?: string;
  /** Fixed port (e.g. one already named in PLATFORM_PUBLIC_URL); default any free port. */
  port?: number;
  /** Where the control plane's log lines go, at debug level (tests that read the log); default none. */
  logTo?: { write(line: string): void };
}

export { freePort } from "../support/ports.js";

export async function startTestInstance(env: Record<string, string> = {}, opts: StartOptions = {}): Promise<TestInstance> {
  const dir = mkdtempSync(join(tmpdir(), "capstan-api-"));
  const pgAdmin = process.env.CAPSTAN_TEST_PG_URL;
  const pgDb = pgAdmin ? await freshPostgresDatabase(pgAdmin) : null;
  const baseEnv = {
    PLATFORM_DATA_DIR: dir,
    PLATFORM_LOG_LEVEL: "silent",
    PLATFORM_RATE_LIMIT_PER_MINUTE: "1000000",
    ...(pgDb ? { DATABASE_URL: pgDb.url } : {}),
    // A checkout that builds its agent image under its own name (CAPSTAN_AGENT_REPO, see
    // deploy/agent/build-image.sh) installs that image on test hosts.
    ...(process.env.CAPSTAN_AGENT_REPO ? { PLATFORM_AGENT_IMAGE: `${process.env.CAPSTAN_AGENT_REPO}:latest` } : {}),
    ...env,
  };
  let config = loadConfig(baseEnv);
  // Warnings and errors are kept for a failing test's report (support/recent-log.ts).
  const logger = () => pino({ level: opts.logTo ? "debug" : "warn" }, recentLogStream(opts.logTo));
  let instance = await createInstance(config, logger());
  const rootToken = (await instance.admin.bootstrapRoot(config.rootEmail))!;
  const rootTeamId = (await instance.database.prisma.team.findFirstOrThrow({ orderBy: { id: "asc" } })).id;
  // Every TCP connection, upgraded (agent websockets) or not, so stop() can cut them all at
  // once like a crashed process would.
  const sockets = new Set<Socket>();
  const listen = async (port: number) => {
    const server: Server = createHttpServer(instance.app);
    server.on("connection", (sock) => {
      sockets.add(sock);
      sock.once("close", () => sockets.delete(sock));
    });
    await instance.attach(server);
    await new Promise<void>((r) => server.listen(port, opts.host ?? "127.0.0.1", r));
    return server;
  };
  let server = await listen(opts.port ?? 0);
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    for (const sock of sockets) sock.destroy();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await instance.close();
  };
  let seq = 0;

  const newMember = async (teamId: number, role: TeamRole, scopes: TokenScope[] = ["read", "write", "deploy"]) => {
    const n = ++seq;
    const userId = await instance.admin.createUser(`user ${n}`, `user${n}-${randomBytes(3).toString("hex")}@example.test`);
    await instance.admin.setMember(teamId, userId, role);
    const token = await instance.admin.createToken({ teamId, userId, name: `t${n}`, scopes });
    return { userId, token };
  };

  const result: TestInstance = {
    url,
    config,
    instance,
    rootToken,
    rootTeamId,
    api: (token?: string) => client(url + "/api/v1", token),
    async newTeam(name = `team ${++seq}`) {
      const teamId = await instance.admin.createTeam(name);
      const owner = await newMember(teamId, "owner");
      return { teamId, ownerId: owner.userId, token: owner.token, api: client(url + "/api/v1", owner.token) };
    },
    newMember,
    async restart(downMs = 0, env = {}, whileDown) {
      await stop();
      await new Promise((r) => setTimeout(r, downMs));
      await whileDown?.();
      config = loadConfig({ ...baseEnv, ...env });
      result.config = config;
      instance = await createInstance(config, logger());
      result.instance = instance;
      server = await listen(port);
    },
    async close() {
      await stop();
      if (pgDb) await pgDb.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return result;
}
