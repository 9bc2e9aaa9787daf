import { readdirSync, readFileSync } from "node:fs";

/**
 * Reads every process's argv and environment on this machine (/proc/<pid>/cmdline and environ,
 * test hosts' and their containers' processes included) again and again until stopped; answers
 * the processes whose text held `secret`, how many processes were read and in how many passes.
 */
export function scanProcesses(secret: string): { stop(): { hits: string[]; processesSeen: number; passes: number } } {
  const hits = new Set<string>();
  const seen = new Set<string>();
  let passes = 0;
  let running = true;
  const pass = () => {
    for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
      for (const file of ["cmdline", "environ"]) {
        try {
          const text = readFileSync(`/proc/${pid}/${file}`, "latin1");
          seen.add(pid);
          if (text.includes(secret)) hits.add(`${pid} ${file}: ${text.replace(/\0/g, " ").slice(0, 200)}`);
        } catch {
          // gone meanwhile, or not ours to read
        }
      }
    }
    passes++;
  };
  const loop = async () => {
    while (running) {
      pass();
      await new Promise((r) => setImmediate(r));
    }
  };
  const done = loop();
  return {
    stop() {
      running = false;
      void done;
      pass();
      return { hits: [...hits], processesSeen: seen.size, passes };
    },
  };
}

