/**
 * One agent job run by the agent's own handler in a process of its own: its peak memory is the
 * agent's alone (bench/resource-backup), and killing it is an agent crash mid-job
 * (test/e2e/resource-backup-stop.test.ts). Reads {stateDir, type, payload, labels} as JSON on
 * stdin (payloads hold secrets: never argv), parses the payload with the job's shared schema,
 * prints {ms, rssBeforeBytes, maxRssBytes, result} as JSON on stdout.
 */
import { randomUUID } from "node:crypto";
import { JOBS } from "@capstan/shared";
import { DockerodeEngine } from "../../agent/src/docker/dockerode-engine.js";
import { createHandlers } from "../../agent/src/handlers/index.js";

type JobType = keyof typeof JOBS & keyof ReturnType<typeof createHandlers>;
const chunks: Buffer[] = [];
for await (const c of process.stdin) chunks.push(c as Buffer);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { stateDir: string; type: JobType; payload: unknown; labels?: Record<string, string> };
if (!(input.type in JOBS)) throw new Error(`unknown job type ${input.type}`);
const payload = JOBS[input.type].payload.parse(input.payload);
const handlers = createHandlers(new DockerodeEngine(), { stateDir: input.stateDir, extraLabels: input.labels ?? {} });
const rssBeforeBytes = process.memoryUsage().rss;
const started = performance.now();
const handler = handlers[input.type] as (p: unknown, ctx: Parameters<(typeof handlers)["resource.backup"]>[1]) => Promise<unknown>;
const result = await handler(payload, { signal: AbortSignal.timeout(60 * 60_000), progress: () => {}, job: { id: randomUUID(), attempt: 1 } });
const ms = performance.now() - started;
// maxRSS is in KiB: the process's peak resident memory over its whole life.
// Exits once written: the engine client's keep-alive sockets and the handlers' timers would keep it up.
process.stdout.write(JSON.stringify({ ms, rssBeforeBytes, maxRssBytes: process.resourceUsage().maxRSS * 1024, result }), () => process.exit(0));
