import type { EngineNetwork } from "@capstan/shared";
import type { Engine } from "../docker/engine.js";
import { toEngineNetwork } from "./engine-network.js";

const INSPECT_CONCURRENCY = 8;

/**
 * networks.list: every network on the engine (or only those named in `names`), each fully
 * inspected (the engine's list leaves out the containers), sorted by name. A network removed
 * between the list and its inspection is left out.
 */
export async function listNetworks(engine: Engine, opts: { names?: readonly string[] }, signal: AbortSignal): Promise<EngineNetwork[]> {
  const wanted = opts.names ? new Set(opts.names) : null;
  const summaries = (await engine.listAllNetworks(signal)).filter((n) => !wanted || wanted.has(n.name));
  const out: EngineNetwork[] = [];
  for (let i = 0; i < summaries.length; i += INSPECT_CONCURRENCY) {
    const chunk = summaries.slice(i, i + INSPECT_CONCURRENCY);
    for (const d of await Promise.all(chunk.map((n) => engine.inspectNetworkDetails(n.id, signal)))) {
      if (d) out.push(toEngineNetwork(d));
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
}
