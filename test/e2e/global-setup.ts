import { sh, repo } from "./support/kit.js";
import { join } from "node:path";

/**
 * Once per run: a real Docker Engine (installed and started when the machine has none),
 * the local base images, and the agent image built from this checkout.
 */
export default async function setup(): Promise<() => Promise<void>> {
  await sh("bash", [join(repo, "test/kit/engine.sh"), "up"]);
  await sh("bash", [join(repo, "test/kit/images.sh"), "busybox", "debian", "dind"]);
  await sh("bash", [join(repo, "deploy/agent/build-image.sh")]);
  return async () => {
    await sh("bash", [join(repo, "test/kit/cleanup.sh")]);
  };
}
