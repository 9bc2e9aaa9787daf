import { sh, repo } from "./support/kit.js";
import { join } from "node:path";

/**
 * Once per run: tools, a real Docker Engine (installed and started when the machine has
 * none), the local base images, and the agent and proxy images built from this checkout.
 */
export default async function setup(): Promise<() => Promise<void>> {
  await sh("bash", [join(repo, "test/kit/prepare.sh")]);
  return async () => {
    await sh("bash", [join(repo, "test/kit/cleanup.sh")]);
  };
}
