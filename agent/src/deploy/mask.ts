import type { BuildPayload, DeployPayload } from "@capstan/shared";

// One masker for both ends (shared/src/log/mask.ts); re-exported for the agent's callers.
export { MASK, MIN_SECRET_LENGTH, createMasker, maskError, type Masker } from "@capstan/shared";

/** The values a deployment must never print: run and build env values, git credentials. */
export function deploySecrets(p: DeployPayload): string[] {
  const out = [...Object.values(p.run.env), ...Object.values(p.build.env)];
  if (p.source.kind === "image" && p.source.auth) out.push(p.source.auth.password);
  if (p.source.kind === "git") {
    const auth = p.source.auth;
    if (auth.kind === "token") out.push(auth.token);
    if (auth.kind === "ssh") out.push(auth.private_key);
  }
  return out;
}

/** The values an image build on a build server must never print: build env, git credentials, the registry password. */
export function buildSecrets(p: BuildPayload): string[] {
  const out = [...Object.values(p.build.env)];
  if (p.push.auth) out.push(p.push.auth.password);
  if (p.source.kind === "git") {
    const auth = p.source.auth;
    if (auth.kind === "token") out.push(auth.token);
    if (auth.kind === "ssh") out.push(auth.private_key);
  }
  return out;
}
