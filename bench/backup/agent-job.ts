/**
 * One db.backup run by the agent's own handler in a process of its own, so that its peak memory
 * is the agent's alone. Reads {stateDir, payload} as JSON on stdin (the payload holds passwords:
 * never argv), prints {ms, rssBeforeBytes, maxRssBytes, result} as JSON on stdout.
 */
import { randomUUID } from "node:crypto";
import { DbBackupPayload } from "@capstan/shared";
import { DockerodeEngine } from "../../agent/src/docker/dockerode-engine.js";
import { createHandlers } from "../../agent/src/handlers/index.js";

const chunks: Buffer[] = [];
for await (const c of process.stdin) chunks.push(c as Buffer);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { stateDir: string; payload: unknown };
const payload = DbBackupPayload.parse(input.payload);
const handlers = createHandlers(new DockerodeEngine(), { stateDir: input.stateDir, extraLabels: { "capstan.bench": "1" } });
const rssBeforeBytes = process.memoryUsage().rss;
const started = performance.now();
const result = await handlers["db.backup"](payload, {
  signal: AbortSignal.timeout(60 * 60_000),
  progress: () => {},
  job: { id: randomUUID(), attempt: 1 },
});
const ms = performance.now() - started;
// maxRSS is in KiB: the process's peak resident memory over its whole life.
process.stdout.write(JSON.stringify({ ms, rssBeforeBytes, maxRssBytes: process.resourceUsage().maxRSS * 1024, result }));
