// Prints the gzipped size of the dashboard's JavaScript and fails the build above the budget
// (issue 22: under 250 KB gzipped).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

const BUDGET = 250 * 1024;
const dir = new URL("../dist/assets/", import.meta.url).pathname;
let total = 0;
for (const name of readdirSync(dir).filter((n) => n.endsWith(".js"))) {
  const size = gzipSync(readFileSync(join(dir, name)), { level: 9 }).length;
  total += size;
  console.log(`dashboard: ${name} ${(size / 1024).toFixed(1)} KB gzipped`);
}
console.log(`dashboard: JavaScript total ${(total / 1024).toFixed(1)} KB gzipped (budget ${BUDGET / 1024} KB)`);
if (total > BUDGET) {
  console.error("dashboard: over the JavaScript budget");
  process.exit(1);
}
