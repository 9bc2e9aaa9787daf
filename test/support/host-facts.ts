import type { HostFacts } from "@capstan/shared";

/** Plausible host facts for simulated agents (API tests, bench/fleet). */
export function sampleHostFacts(hostname = "test-host"): HostFacts {
  return {
    hostname,
    os: { platform: "linux", distro: "Debian GNU/Linux", release: "12", arch: "x64", kernel: "6.1.0" },
    cpu: { cores: 2, model: "test cpu" },
    memory: { total_bytes: 8e9, available_bytes: 6e9 },
    disk: { total_bytes: 1e11, free_bytes: 5e10 },
    engine: { running: true, version: "20.10.24", api_version: "1.41", compose_version: "2.20.0", swarm: "inactive" },
  };
}
