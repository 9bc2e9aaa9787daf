import type { ContainerDetails, ContainerSummary, Engine } from "./engine.js";

const INSPECT_CONCURRENCY = 8;

/**
 * Details (state, health, labels) of listed containers: the engine's list has no health, so
 * each is inspected, a few at a time. A container removed since the list was taken, or
 * replaced by another of the same name, is left out.
 */
export async function inspectAll(engine: Engine, summaries: ContainerSummary[], signal?: AbortSignal): Promise<ContainerDetails[]> {
  const out: ContainerDetails[] = [];
  for (let i = 0; i < summaries.length; i += INSPECT_CONCURRENCY) {
    const chunk = summaries.slice(i, i + INSPECT_CONCURRENCY);
    const details = await Promise.all(chunk.map((s) => engine.inspectContainer(s.name, signal)));
    details.forEach((d, j) => {
      if (d && d.id === chunk[j]!.id) out.push(d);
    });
  }
  return out;
}
