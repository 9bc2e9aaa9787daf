/**
 * The control planes' warnings and errors of this test file, kept in memory (the newest
 * LIMIT lines) so that a failing test prints what the control plane complained about while it
 * ran (setup.ts): an unacked outcome or a job that never came is otherwise a bare timeout.
 */
const LIMIT = 300;
const lines: string[] = [];
let written = 0;

/** A pino destination: every line goes to `also` (if any); warnings and worse are kept. */
export function recentLogStream(also?: { write(line: string): void }): { write(line: string): void } {
  return {
    write(line: string) {
      also?.write(line);
      if (!/"level":(40|50|60)\b/.test(line)) return;
      lines.push(line.endsWith("\n") ? line : `${line}\n`);
      written++;
      if (lines.length > LIMIT) lines.shift();
    },
  };
}

/** A position in the kept lines (how many were ever kept). */
export const recentLogMark = (): number => written;

/** The kept lines after a mark (those that fell out of the window are gone). */
export function recentLogSince(mark: number): string[] {
  const count = Math.min(written - mark, lines.length);
  return count > 0 ? lines.slice(lines.length - count) : [];
}
