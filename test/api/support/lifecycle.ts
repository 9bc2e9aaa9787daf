import { afterAll, beforeAll } from "vitest";
import { startTestInstance, type TestInstance } from "../harness.js";
import { KeyFactory } from "./ssh.js";
import type { ScriptedAgent } from "./fake-agent.js";
import { connectedWorld, type AppWorld } from "./applications.js";

/**
 * The setup the resource lifecycle files share (applications-lifecycle, databases-lifecycle,
 * compatibility): one control plane for the file, the SSH keys its worlds use and the scripted
 * agents they connect, all closed after the file's tests.
 */
export interface LifecycleFile {
  keys: KeyFactory;
  /** Agents to close after the file (connectedWorld adds its own). */
  agents: ScriptedAgent[];
  /** A new team world whose server's agent is connected. */
  connectedWorld(): Promise<{ w: AppWorld; agent: ScriptedAgent }>;
  /** The control plane's database. */
  prisma(): TestInstance["instance"]["database"]["prisma"];
}

/**
 * Registers the file's beforeAll/afterAll. `started` receives the control plane once it runs
 * (the files keep it in their own `t`, which most of their calls take).
 */
export function lifecycleFile(started: (t: TestInstance) => void): LifecycleFile {
  let t: TestInstance | undefined;
  const keys = new KeyFactory();
  const agents: ScriptedAgent[] = [];
  const instance = () => {
    if (!t) throw new Error("the control plane starts in beforeAll");
    return t;
  };
  beforeAll(async () => {
    t = await startTestInstance();
    started(t);
  });
  afterAll(async () => {
    for (const a of agents) a.close();
    await t?.close();
    keys.cleanup();
  });
  return {
    keys,
    agents,
    connectedWorld: () => connectedWorld(instance(), keys, agents),
    prisma: () => instance().instance.database.prisma,
  };
}
