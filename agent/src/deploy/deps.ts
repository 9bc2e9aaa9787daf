import type { BaseImages, DeployPayload, DeploySource, ProxySettings, SourceBuilder } from "@capstan/shared";
import type { Engine } from "../docker/engine.js";
import { planBuild } from "../builders/index.js";
import { type ProxyOptions, syncProxy } from "../proxy/index.js";
import { fetchGit } from "../source/git.js";
import { composeDown, deployCompose } from "./compose.js";

/**
 * What the other agent modules provide to a deployment (the proxy, git, the builders, compose):
 * injected so the deploy handler is tested with fakes. The real ones are defaultDeps().
 */
export interface StepCtx {
  signal: AbortSignal;
  progress(line: string): void;
}

export interface BuildPlanLike {
  dockerfile: string;
  files: Record<string, string>;
  summary: string;
}

export interface DeployDeps {
  syncProxy(engine: Engine, settings: ProxySettings, ctx: StepCtx): Promise<{ routes: number }>;
  fetchGit(src: Extract<DeploySource, { kind: "git" }>, dest: string, ctx: StepCtx): Promise<{ commit: string; message: string }>;
  planBuild(input: { pack: SourceBuilder; dir: string; baseImages: BaseImages; buildEnv: Record<string, string>; ports: number[] }): Promise<BuildPlanLike>;
  deployCompose(engine: Engine, payload: DeployPayload, ctx: StepCtx & { stateDir: string; extraLabels?: Record<string, string> }): Promise<{ container: string; status: string }>;
  /** Removes a compose application's project (containers, its network, volumes if asked; its stored file unless keepFiles). */
  composeDown(engine: Engine, opts: { appUuid: string; removeVolumes: boolean; keepFiles?: boolean }, ctx: StepCtx & { stateDir: string }): Promise<unknown>;
}

/** The real implementations; `proxy` tunes the proxy (tests: their own proxy name, labels). */
export function defaultDeps(proxy: ProxyOptions = {}): DeployDeps {
  return {
    syncProxy: (engine, settings, ctx) => syncProxy(engine, settings, ctx, proxy),
    fetchGit,
    planBuild,
    deployCompose,
    composeDown,
  };
}
