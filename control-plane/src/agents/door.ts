import type { Server as HttpServer } from "node:http";
import { Server as IoServer, type Socket } from "socket.io";
import { AGENTS_NAMESPACE, FLEET_NAMESPACE } from "@capstan/shared";

/** Ping every 2.5 s, give up after 5 s more: a vanished agent is noticed within ~7.5 s. */
export const PING_INTERVAL_MS = 2500;
export const PING_TIMEOUT_MS = 5000;
/**
 * A connection that joins no namespace within this is closed. It covers a handshake held at
 * the door while the control plane starts, and stays under the agent's own 20 s handshake
 * timeout plus its retry delay.
 */
const CONNECT_TIMEOUT_MS = 30_000;
/** Handshakes held while the control plane starts; beyond, they are told to come back. */
const MAX_HELD = 20_000;

type Check = (socket: Socket, next: (err?: Error) => void) => void;

/**
 * The socket.io server of a control plane, open before the rest of the control plane is
 * ready. A restarted control plane meets its whole fleet reconnecting with exponential backoff:
 * an agent refused at the TCP level waits longer with each try (up to 10 s), so every second
 * spent loading modules and opening the database before listening came back several times
 * over in reconnect time. Listening first, the door holds the handshakes of /agents and
 * /fleet (nothing is checked or answered yet) until the gateway opens it with its checks.
 * The default namespace `/` serves nothing and refuses every connection.
 */
export interface GatewayDoor {
  readonly io: IoServer;
  /** Lets handshakes through these checks: those held so far, then every later one. */
  open(checks: { agents: Check; fleet: Check }): void;
}

export function openGatewayDoor(http: HttpServer): GatewayDoor {
  const io = new IoServer(http, {
    pingInterval: PING_INTERVAL_MS,
    pingTimeout: PING_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxHttpBufferSize: 4 * 1024 * 1024,
    serveClient: false,
    cors: { origin: false },
  });
  io.use((_socket, next) => next(new Error("Unauthenticated.")));
  let checks: { agents: Check; fleet: Check } | null = null;
  const held: { lane: "agents" | "fleet"; socket: Socket; next: (err?: Error) => void }[] = [];
  for (const [name, lane] of [
    [AGENTS_NAMESPACE, "agents"],
    [FLEET_NAMESPACE, "fleet"],
  ] as const) {
    io.of(name).use((socket, next) => {
      if (checks) return checks[lane](socket, next);
      if (held.length >= MAX_HELD) return next(new Error("busy, retry later"));
      held.push({ lane, socket, next });
    });
  }
  return {
    io,
    open(c) {
      checks = c;
      // A held handshake whose connection closed meanwhile is dropped by socket.io after its check.
      for (const h of held.splice(0)) c[h.lane](h.socket, h.next);
    },
  };
}
