// Adds up the vitest JSON reports of one test run and prints "N passed, N failed". A file whose
// suite failed outside its tests (a hook that timed out, an error while loading) fails the run
// too, even when every test in it passed. Each failed test is named with the start of its failure,
// because the end of the log is often all that is kept of a CI run.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2];
let passed = 0, failed = 0, skipped = 0, brokenFiles = 0;
for (const f of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
  const r = JSON.parse(readFileSync(join(dir, f), "utf8"));
  passed += r.numPassedTests;
  failed += r.numFailedTests;
  skipped += r.numPendingTests + (r.numTodoTests ?? 0);
  const broken = (r.testResults ?? []).filter((t) => t.status === "failed" && (t.assertionResults ?? []).every((a) => a.status !== "failed"));
  brokenFiles += broken.length;
  console.log(`${f.replace(/\.json$/, "")}: ${r.numPassedTests} passed, ${r.numFailedTests} failed${broken.length ? `, ${broken.length} file(s) failed outside their tests` : ""}`);
  for (const b of broken) console.log(`  ${b.name}: ${(b.message ?? "").split("\n")[0]}`);
  for (const file of r.testResults ?? []) {
    for (const a of (file.assertionResults ?? []).filter((a) => a.status === "failed")) {
      console.log(`  FAILED ${file.name.replace(/^.*?\/test\//, "test/")} > ${a.fullName}`);
      // The start of each failure: the error and where it was thrown, then what the test's
      // setup attached (test/api/setup.ts: the control plane's warnings during the test).
      const why = (a.failureMessages ?? []).flatMap((m, i) => m.split("\n").filter((l) => l.trim()).slice(0, i === 0 ? 6 : 14));
      for (const line of why.slice(0, 24)) console.log(`    ${line.slice(0, 400)}`);
    }
  }
}
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}${brokenFiles ? `, ${brokenFiles} file(s) failed outside their tests` : ""}`);
process.exit(failed > 0 || brokenFiles > 0 || passed === 0 ? 1 : 0);
