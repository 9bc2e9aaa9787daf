import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { DockerodeEngine } from "../docker/dockerode-engine.js";

const imagesScript = fileURLToPath(new URL("../../../test/kit/images.sh", import.meta.url));

/**
 * Why a unit test file that needs a real Docker Engine and one of test/kit's images cannot run
 * here, or null when it can (an image that is missing is built with test/kit/images.sh first).
 * On a developer's machine without an engine the file is skipped with that reason; where the
 * engine must be there (CAPSTAN_TEST_REQUIRE_ENGINE=1, set by `npm test`), it is an error, so a
 * broken engine never passes as a skipped file.
 */
export async function engineSkipReason(engine: DockerodeEngine, kitImage: string, testFile: string): Promise<string | null> {
  const image = `capstan-test/${kitImage}:latest`;
  let reason: string | null = null;
  try {
    await engine.ping(AbortSignal.timeout(3000));
    if (!(await engine.imageExists(image))) {
      if (!existsSync(imagesScript)) reason = `image ${image} is missing and ${imagesScript} does not exist`;
      else await promisify(execFile)("bash", [imagesScript, kitImage], { timeout: 300_000 });
    }
  } catch (err) {
    reason = `no Docker Engine answers or ${image} could not be built (${(err as Error).message}); run \`bash test/kit/engine.sh up\` and \`bash test/kit/images.sh ${kitImage}\``;
  }
  if (reason && process.env.CAPSTAN_TEST_REQUIRE_ENGINE === "1") throw new Error(`[${testFile}] ${reason}`);
  if (reason) console.warn(`[${testFile}] SKIPPED: ${reason}`);
  return reason;
}
