import { statfs } from "node:fs/promises";
import { arch, cpus, freemem, hostname, platform, release, totalmem } from "node:os";
import si from "systeminformation";
import type { HostFacts } from "@capstan/shared";
import type { Engine, EngineInfo } from "../docker/engine.js";
import { gatherProxyFacts } from "../proxy/index.js";
import { errorMessage, type Logger, silentLogger } from "../log.js";

const ENGINE_TIMEOUT_MS = 10_000;

async function settle<T>(p: Promise<T>, log: Logger, what: string, failed?: (err: unknown) => void): Promise<T | null> {
  try {
    return await p;
  } catch (err) {
    log.debug(`could not read ${what}`, { err: errorMessage(err) });
    failed?.(err);
    return null;
  }
}

const ENGINE_ERROR_MAX = 1000;

async function diskOf(paths: string[]): Promise<{ total_bytes: number; free_bytes: number }> {
  for (const p of paths) {
    try {
      const s = await statfs(p);
      return { total_bytes: s.blocks * s.bsize, free_bytes: s.bavail * s.bsize };
    } catch {
      // next candidate
    }
  }
  return { total_bytes: 0, free_bytes: 0 };
}

/**
 * What the agent reports about its host. The agent normally runs in a container, where the OS
 * it sees is the image's: so name, OS, kernel, architecture, CPU count and memory come from the
 * Docker Engine (which describes the host) when it answers, and from systeminformation/os
 * otherwise. Disk is the filesystem holding Docker's data (the container's / sits on it).
 */
export async function gatherFacts(engine: Engine, log: Logger = silentLogger): Promise<HostFacts> {
  const signal = AbortSignal.timeout(ENGINE_TIMEOUT_MS);
  // Why the engine does not answer, for the server's detail (settings.unusable_reason).
  let engineError: string | null = null;
  const [osInfo, cpu, mem, info, version, compose, proxy] = await Promise.all([
    settle(si.osInfo(), log, "os info"),
    settle(si.cpu(), log, "cpu info"),
    settle(si.mem(), log, "memory info"),
    settle<EngineInfo>(engine.info(signal), log, "engine info", (err) => (engineError ??= errorMessage(err))),
    settle(engine.version(signal), log, "engine version", (err) => (engineError ??= errorMessage(err))),
    settle(engine.composeVersion(signal), log, "compose version"),
    settle(gatherProxyFacts(engine, signal), log, "proxy"),
  ]);
  const running = info !== null && version !== null;
  const disk = await diskOf([info?.dockerRootDir ?? "/var/lib/docker", "/"]);
  return {
    hostname: info?.name ?? osInfo?.hostname ?? hostname(),
    os: {
      platform: info?.osType ?? osInfo?.platform ?? platform(),
      distro: info?.operatingSystem ?? osInfo?.distro ?? "unknown",
      release: (info?.operatingSystem && /\b(\d+(?:\.\d+)*)\b/.exec(info.operatingSystem)?.[1]) || osInfo?.release || "unknown",
      arch: info?.architecture ?? osInfo?.arch ?? arch(),
      kernel: info?.kernelVersion ?? osInfo?.kernel ?? release(),
    },
    cpu: {
      cores: info?.ncpu ?? cpu?.cores ?? cpus().length,
      model: cpu?.brand ? `${cpu.manufacturer} ${cpu.brand}`.trim() : (cpus()[0]?.model ?? "unknown"),
    },
    memory: {
      total_bytes: info?.memTotal ?? mem?.total ?? totalmem(),
      available_bytes: mem?.available ?? freemem(),
    },
    disk,
    engine: {
      running,
      version: version?.version ?? info?.serverVersion ?? null,
      api_version: version?.apiVersion ?? null,
      compose_version: running ? compose : null,
      swarm: info?.swarm ?? null,
      swarm_role: info?.swarmRole ?? null,
      error: running ? null : (engineError ?? "the Docker Engine did not answer").slice(0, ENGINE_ERROR_MAX),
    },
    proxy,
  };
}
