import { mkdir, readFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Engine } from "../docker/engine.js";
import { TMP_SUFFIX, writeFileAtomic } from "../state/atomic.js";

/**
 * The journal of stop_during_backup (docs/resource-backups.md): before a resource backup stops
 * a resource's containers it writes, in the agent's state dir, which ones it is about to stop;
 * it removes the entry once they run again. An entry left behind means the agent died between
 * the two, so on start-up (recoverStoppedContainers) the agent starts every container listed and
 * then removes the entry. One file per backup run, so that runs of several resources never
 * rewrite each other's entries.
 */
export const JOURNAL_DIR = "backup-stopped";

export interface StopJournalEntry {
  /** the resource whose containers were stopped */
  resource_uuid: string;
  /** the backup run (its execution uuid): the entry's file name */
  execution_uuid: string;
  containers: { id: string; name: string }[];
  /** when the containers were stopped (ISO) */
  at: string;
}

const SAFE = /^[a-z0-9-]{1,64}$/;
const dirOf = (stateDir: string) => join(stateDir, JOURNAL_DIR);
const fileOf = (stateDir: string, executionUuid: string) => {
  if (!SAFE.test(executionUuid)) throw new Error(`not a journal key: ${JSON.stringify(executionUuid)}`);
  return join(dirOf(stateDir), `${executionUuid}.json`);
};

/** Records (durably: fsync'd, atomic rename) the containers a backup is about to stop. */
export async function writeStopJournal(stateDir: string, entry: StopJournalEntry): Promise<void> {
  await mkdir(dirOf(stateDir), { recursive: true, mode: 0o700 });
  await writeFileAtomic(fileOf(stateDir, entry.execution_uuid), JSON.stringify(entry));
}

/** Removes a backup's entry once its containers run again (nothing when there is none). */
export async function removeStopJournal(stateDir: string, executionUuid: string): Promise<void> {
  await rm(fileOf(stateDir, executionUuid), { force: true });
}

/** The entries left in the journal (unreadable or foreign files are reported and skipped). */
export async function readStopJournal(stateDir: string, warn: (message: string) => void = () => {}): Promise<StopJournalEntry[]> {
  let names: string[];
  try {
    names = await readdir(dirOf(stateDir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const out: StopJournalEntry[] = [];
  for (const name of names.sort()) {
    if (name.endsWith(TMP_SUFFIX)) {
      // A write that did not finish: its containers were not stopped yet (the stop follows the rename).
      await rm(join(dirOf(stateDir), name), { force: true });
      continue;
    }
    if (!name.endsWith(".json")) continue;
    try {
      const e = JSON.parse(await readFile(join(dirOf(stateDir), name), "utf8")) as StopJournalEntry;
      if (typeof e.resource_uuid !== "string" || typeof e.execution_uuid !== "string" || !Array.isArray(e.containers)) throw new Error("not a journal entry");
      if (!e.containers.every((c) => c && typeof c.id === "string" && typeof c.name === "string")) throw new Error("a container without id or name");
      out.push(e);
    } catch (err) {
      warn(`backup stop journal: ${name} is unreadable (${(err as Error).message}); left in place`);
    }
  }
  return out;
}

/** Whether an engine error says the container is gone (removed meanwhile: nothing to start). */
const isGone = (err: unknown) => (err as { statusCode?: number }).statusCode === 404 || /no such container/i.test((err as Error).message ?? "");

/**
 * Agent start-up: starts every container a backup stopped and did not start again (the agent
 * died in between), then removes that entry. Starting one that already runs is a no-op for the
 * engine; one that was removed meanwhile is skipped. An entry whose containers could not all be
 * started (the engine is down) stays for the next start-up. Returns what was started.
 */
export async function recoverStoppedContainers(
  engine: Pick<Engine, "startContainer">,
  stateDir: string,
  log: { info(m: string, f?: Record<string, unknown>): void; warn(m: string, f?: Record<string, unknown>): void },
): Promise<string[]> {
  const started: string[] = [];
  for (const entry of await readStopJournal(stateDir, (m) => log.warn(m))) {
    let failed = false;
    for (const c of entry.containers) {
      try {
        await engine.startContainer(c.id);
        started.push(c.name);
      } catch (err) {
        if (isGone(err)) continue;
        failed = true;
        log.warn("could not start a container a backup had stopped; tried again at the next start", { container: c.name, err: (err as Error).message });
      }
    }
    if (!failed) {
      await removeStopJournal(stateDir, entry.execution_uuid);
      log.info("started the containers an interrupted backup had stopped", { resource: entry.resource_uuid, execution: entry.execution_uuid, containers: entry.containers.map((c) => c.name) });
    }
  }
  return started;
}
