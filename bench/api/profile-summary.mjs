// Where a V8 CPU profile (.cpuprofile) spent its time: self time by package or source file,
// the hottest functions, and the time spent under (inclusive) each of our source files.
// usage: node bench/api/profile-summary.mjs FILE.cpuprofile [--top N]
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** node_modules/<pkg>, our repo file, node:internal, or a V8 pseudo-frame. */
function where(url, functionName) {
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  const path = url.startsWith("file://") ? fileURLToPath(url) : url;
  const nm = path.lastIndexOf("node_modules/");
  if (nm !== -1) {
    const rest = path.slice(nm + "node_modules/".length).split("/");
    return rest[0].startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (path.startsWith("node:")) return "node:" + path.slice(5).split("/")[0];
  if (path.startsWith(root)) return path.slice(root.length);
  return path;
}

export function summarizeProfile(file, top = 25) {
  const profile = JSON.parse(readFileSync(file, "utf8"));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  // Self time per node from the sample stream (exact intervals, not hitCount estimates).
  const self = new Map();
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i + 1] ?? 0;
    self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + dt);
    total += dt;
  }
  const idle = [...byId.values()].filter((n) => n.callFrame.functionName === "(idle)").reduce((s, n) => s + (self.get(n.id) ?? 0), 0);
  const busy = total - idle;

  const byPlace = new Map();
  const byFunction = new Map();
  const inclusive = new Map();
  const parent = new Map();
  for (const n of byId.values()) for (const c of n.children ?? []) parent.set(c, n.id);
  for (const n of byId.values()) {
    const t = self.get(n.id) ?? 0;
    if (!t || n.callFrame.functionName === "(idle)") continue;
    const { functionName, url, lineNumber } = n.callFrame;
    const place = where(url, functionName);
    byPlace.set(place, (byPlace.get(place) ?? 0) + t);
    const fn = `${functionName || "(anonymous)"}  ${place}${url ? ":" + (lineNumber + 1) : ""}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + t);
    // Inclusive: charge this sample time once to every one of our files on its stack.
    const seen = new Set();
    for (let id = n.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id).callFrame;
      const p = where(f.url, f.functionName);
      if (p.startsWith("control-plane/") || p.startsWith("shared/")) {
        const key = `${p} ${f.functionName || "(anonymous)"}`;
        if (!seen.has(key)) {
          seen.add(key);
          inclusive.set(key, (inclusive.get(key) ?? 0) + t);
        }
      }
    }
  }
  const pct = (t) => `${((100 * t) / busy).toFixed(1).padStart(5)}%`;
  const ms = (t) => `${(t / 1000).toFixed(0).padStart(7)} ms`;
  const table = (m, n) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, t]) => `  ${pct(t)} ${ms(t)}  ${k}`)
      .join("\n");
  return [
    `busy ${(busy / 1000).toFixed(0)} ms of ${(total / 1000).toFixed(0)} ms sampled (${((100 * busy) / total).toFixed(0)}% of one core)`,
    "",
    "Self time by package / file:",
    table(byPlace, 20),
    "",
    `Hottest functions (self time):`,
    table(byFunction, top),
    "",
    "Time under our functions (inclusive, synchronous part of their stacks only):",
    table(inclusive, top),
  ].join("\n");
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = process.argv[2];
  if (!file) {
    console.error("usage: node bench/api/profile-summary.mjs FILE.cpuprofile [--top N]");
    process.exit(2);
  }
  const at = process.argv.indexOf("--top");
  console.log(summarizeProfile(file, at === -1 ? 25 : Number(process.argv[at + 1])));
}
