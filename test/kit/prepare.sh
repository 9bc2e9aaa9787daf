#!/usr/bin/env bash
# Everything the Docker-backed suites need on this machine, in one place (scripts/test.sh
# runs it in the background; the e2e global setup runs it when used alone): tools from
# Debian, a running Docker Engine, the local base images, and the product images built from
# this checkout (agent, proxy). Each step is idempotent and skips work already done.
set -euo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$kit/../.." && pwd)

bash "$kit/tools.sh"
bash "$kit/engine.sh" up
bash "$kit/images.sh"
bash "$repo/deploy/agent/build-image.sh"
bash "$repo/deploy/proxy/build-image.sh"
