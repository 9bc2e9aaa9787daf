import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { io } from "socket.io-client";
import { pino } from "pino";
import { openGatewayDoor } from "../../control-plane/src/agents/door.js";
import { createInstance } from "../../control-plane/src/instance.js";
import { AGENTS_NAMESPACE, FLEET_NAMESPACE, PROTOCOL_VERSION } from "@capstan/shared";
import { DEFAULT_ADMISSION_LIMITS } from "../../control-plane/src/agents/admission.js";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { connectAgent } from "./support/fake-agent.js";

/**
 * Handshakes under attack (issue 15, item 4): a flood of bogus /agents handshakes must not
 * keep known agents out, failed guesses on /agents and /fleet are throttled per source
 * address (by the HTTP layer's trust proxy rule), and the default namespace serves no one.
 * Every loop here is bounded in count and time, and all traffic stays on loopback.
 */
const keys = new KeyFactory();
afterAll(() => keys.cleanup());

const BOGUS_AGENT = "capa_" + "0".repeat(48);
const BOGUS_API = "cap_" + "x".repeat(40);

/** One handshake on a namespace: resolves with "connected" or the server's refusal message. */
function attempt(url: string, nsp: string, auth: Record<string, unknown>, forwardedFor?: string): Promise<string> {
  const socket = io(url + nsp, {
    forceNew: true,
    transports: ["websocket"],
    reconnection: false,
    // A handshake on a loaded CI machine, beside a flood of 400: seconds, not milliseconds.
    timeout: 20_000,
    auth,
    ...(forwardedFor ? { extraHeaders: { "X-Forwarded-For": forwardedFor } } : {}),
  });
  return new Promise((resolve) => {
    socket.once("connect", () => {
      socket.close();
      resolve("connected");
    });
    socket.once("connect_error", (err) => {
      socket.close();
      resolve(err.message);
    });
  });
}
const agentAuth = (token: string) => ({ token, protocol_version: PROTOCOL_VERSION, agent_version: "test-0.0.1" });

async function serverWithAgent(t: TestInstance, team: TeamFixture, name: string): Promise<string> {
  const key = await keys.generate("ed25519");
  const keyUuid = (await team.api.post("/security/keys", { name, private_key: key.privateKey })).body.uuid;
  const created = await team.api.post("/servers", { name, ip: "10.0.0.9", private_key_uuid: keyUuid });
  expect(created.status).toBe(201);
  // Its first handshake makes the token known to the replica (as a running fleet's are).
  const agent = await connectAgent(t.url, created.body.agent_token);
  await agent.hello();
  agent.close();
  return created.body.agent_token as string;
}

describe("agent handshakes on one address, trust proxy off", () => {
  let t: TestInstance;
  let team: TeamFixture;
  let token: string;
  beforeAll(async () => {
    t = await startTestInstance();
    team = await t.newTeam();
    token = await serverWithAgent(t, team, "flooded");
  });
  afterAll(async () => {
    await t?.close();
  });

  it("a control plane listening before it is ready holds agents' handshakes, then lets them in", async () => {
    // What `capstan serve` does on a (re)start: listen with the gateway's door first.
    const http = createServer((_req, res) => res.writeHead(503).end());
    const door = openGatewayDoor(http);
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    const early = attempt(url, AGENTS_NAMESPACE, agentAuth(token));
    const bogus = attempt(url, AGENTS_NAMESPACE, agentAuth(BOGUS_AGENT));
    const settled: string[] = [];
    void early.then(() => settled.push("agent"));
    await new Promise((r) => setTimeout(r, 700));
    expect(settled).toEqual([]); // held, neither refused nor answered
    const replica = await createInstance(t.config, pino({ level: "silent" }));
    try {
      await replica.attach(http, door);
      expect(await early).toBe("connected");
      expect(await bogus).toBe("invalid agent token");
      expect(await attempt(url, "/", {})).toBe("Unauthenticated.");
    } finally {
      await replica.close();
      http.closeAllConnections();
    }
  });

  it("the default namespace refuses connections", async () => {
    expect(await attempt(t.url, "/", {})).toBe("Unauthenticated.");
    expect(await attempt(t.url, "/", { token: team.token })).toBe("Unauthenticated.");
  });

  it("a known agent keeps connecting while 400 bogus handshakes from its own address flood /agents", async () => {
    let stop = false;
    let floods = 0;
    const refusals: Record<string, number> = {};
    const flood = async () => {
      while (!stop && floods < 20_000) {
        floods++;
        const r = await attempt(t.url, AGENTS_NAMESPACE, agentAuth(BOGUS_AGENT));
        refusals[r] = (refusals[r] ?? 0) + 1;
      }
    };
    const floodStart = Date.now();
    const flooders = Array.from({ length: 400 }, flood);
    // A bound in time beyond the agent's four attempts (20 s each at most): the flood lasts
    // while they run, even where a loaded machine makes each of them slow.
    const limit = setTimeout(() => (stop = true), 4 * 20_000 + 20_000);
    // Let the flood build up, then the real agent (re)connects, again and again.
    await new Promise((r) => setTimeout(r, 500));
    const outcomes: string[] = [];
    for (let i = 0; i < 4; i++) outcomes.push(await attempt(t.url, AGENTS_NAMESPACE, agentAuth(token)));
    expect(stop, "the flood ran for all four attempts").toBe(false);
    const floodsMeanwhile = floods;
    stop = true;
    clearTimeout(limit);
    await Promise.all(flooders);
    const floodMs = Date.now() - floodStart;
    expect(floodsMeanwhile).toBeGreaterThan(800);
    expect(refusals.connected ?? 0).toBe(0);
    // The flood's tokens were checked only until its address had used up its failed attempts
    // (a handshake in flight holds the attempt it may use up, so never more than the bucket
    // held, plus one back per refill period of the flood's duration, which a loaded machine
    // stretches); the rest was refused at once.
    const { failureBurst, failureRefillMs } = DEFAULT_ADMISSION_LIMITS;
    const checkedAtMost = failureBurst + 1 + Math.floor(floodMs / failureRefillMs);
    expect(refusals["invalid agent token"] ?? 0).toBeLessThanOrEqual(checkedAtMost);
    expect(refusals["too many failed attempts from this address, retry later"] ?? 0).toBeGreaterThan(floodsMeanwhile / 2);
    expect(outcomes).toEqual(["connected", "connected", "connected", "connected"]);
  }, 150_000);

  it("failed guesses from an address are throttled on /agents and /fleet; X-Forwarded-For does not count without trust proxy", async () => {
    // The flood above used up this address's failures: further guesses are refused before any
    // check, but for the one attempt the address gets back per refill period meanwhile.
    const since = Date.now();
    const guesses: string[] = [];
    for (let i = 0; i < 20; i++) guesses.push(await attempt(t.url, AGENTS_NAMESPACE, agentAuth(BOGUS_AGENT), `198.51.100.${i}`));
    for (let i = 0; i < 20; i++) guesses.push(await attempt(t.url, FLEET_NAMESPACE, { token: BOGUS_API }, `198.51.100.${i}`));
    const refills = 1 + Math.floor((Date.now() - since) / DEFAULT_ADMISSION_LIMITS.failureRefillMs);
    const throttled = guesses.filter((g) => g === "too many failed attempts from this address, retry later").length;
    expect(throttled).toBeGreaterThanOrEqual(guesses.length - refills);
    expect(guesses.filter((g) => !["too many failed attempts from this address, retry later", "invalid agent token", "Unauthenticated."].includes(g))).toEqual([]);
    // Known agents and valid dashboards from that address still get in.
    expect(await attempt(t.url, AGENTS_NAMESPACE, agentAuth(token))).toBe("connected");
  });
});

describe("agent and dashboard handshakes with PLATFORM_TRUST_PROXY", () => {
  let t: TestInstance;
  let team: TeamFixture;
  let token: string;
  beforeAll(async () => {
    t = await startTestInstance({ PLATFORM_TRUST_PROXY: "true" });
    team = await t.newTeam();
    token = await serverWithAgent(t, team, "proxied");
  });
  afterAll(async () => {
    await t?.close();
  });

  it("counts failures per client address named by X-Forwarded-For, across /agents and /fleet", async () => {
    const { failureBurst: burst, failureRefillMs } = DEFAULT_ADMISSION_LIMITS;
    const since = Date.now();
    const a: string[] = [];
    for (let i = 0; i < burst + 20; i++) a.push(await attempt(t.url, AGENTS_NAMESPACE, agentAuth(BOGUS_AGENT), "203.0.113.10"));
    // A burst is answered (and one more per refill period while this runs); the rest is refused.
    const refills = Math.floor((Date.now() - since) / failureRefillMs);
    const checked = a.filter((r) => r === "invalid agent token").length;
    expect(checked).toBeGreaterThanOrEqual(burst);
    expect(checked).toBeLessThanOrEqual(burst + refills);
    expect(a.filter((r) => r !== "invalid agent token")).toEqual(a.slice(checked).map(() => "too many failed attempts from this address, retry later"));
    // The same address on /fleet is throttled too; another address is not.
    expect(await attempt(t.url, FLEET_NAMESPACE, { token: BOGUS_API }, "203.0.113.10")).toMatch(/too many failed attempts/);
    expect(await attempt(t.url, FLEET_NAMESPACE, { token: BOGUS_API }, "203.0.113.11")).toBe("Unauthenticated.");
    expect(await attempt(t.url, AGENTS_NAMESPACE, agentAuth(BOGUS_AGENT), "203.0.113.11, 10.0.0.1")).toBe("invalid agent token");
    // A valid dashboard token and a known agent behind the throttled address still connect.
    expect(await attempt(t.url, FLEET_NAMESPACE, { token: team.token }, "203.0.113.12")).toBe("connected");
    expect(await attempt(t.url, AGENTS_NAMESPACE, agentAuth(token), "203.0.113.10")).toBe("connected");
  });

  it("/fleet guesses alone are throttled", async () => {
    const { failureBurst: burst, failureRefillMs } = DEFAULT_ADMISSION_LIMITS;
    const since = Date.now();
    const r: string[] = [];
    for (let i = 0; i < burst + 10; i++) r.push(await attempt(t.url, FLEET_NAMESPACE, { token: BOGUS_API }, "203.0.113.20"));
    const refills = Math.floor((Date.now() - since) / failureRefillMs);
    expect(r.filter((x) => x === "Unauthenticated.").length).toBeLessThanOrEqual(burst + refills);
    expect(r.filter((x) => /too many failed attempts/.test(x)).length).toBeGreaterThanOrEqual(10 - refills);
  });
});
