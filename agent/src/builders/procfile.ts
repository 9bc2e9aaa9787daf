import { BuildPlanError } from "./errors.js";

export interface Process {
  name: string;
  command: string;
}

const LINE = /^([A-Za-z0-9_-]+)[ \t]*:[ \t]*(.*)$/;

/** `name: command` lines, as Heroku reads them; blank lines and # comments are skipped. */
export function parseProcfile(text: string): Process[] {
  const out: Process[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const m = LINE.exec(line);
    if (!m) throw new BuildPlanError(`Procfile line ${i + 1} is not "name: command"`);
    const [, name, command] = m as unknown as [string, string, string];
    if (command.trim() === "") throw new BuildPlanError(`Procfile line ${i + 1}: process "${name}" has no command`);
    if (out.some((p) => p.name === name)) throw new BuildPlanError(`Procfile defines process "${name}" twice`);
    out.push({ name, command: command.trim() });
  });
  return out;
}
