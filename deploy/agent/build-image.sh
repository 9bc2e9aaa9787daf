#!/usr/bin/env bash
# Builds the Capstan agent image from local material only (no registry is contacted):
#   - base: a local Debian image (CAPSTAN_AGENT_BASE_IMAGE, default capstan-test/debian:latest,
#     which `bash test/kit/images.sh debian` makes with debootstrap),
#   - node: this machine's own node binary (command -v node),
#   - the built agent and shared packages plus the agent's production node_modules, copied
#     from this checkout (the dependency closure `npm ls --omit=dev -w agent` reports).
# Tags capstan/agent:<agent version> and capstan/agent:latest (repository: CAPSTAN_AGENT_REPO).
# The container expects the Docker socket mounted at /var/run/docker.sock (see install.sh).
# usage: deploy/agent/build-image.sh            prints the versioned tag on stdout
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
base=${CAPSTAN_AGENT_BASE_IMAGE:-capstan-test/debian:latest}
repo_name=${CAPSTAN_AGENT_REPO:-capstan/agent}

say() { echo "build-image.sh: $*" >&2; }
die() { say "$*"; exit 1; }

command -v docker >/dev/null || die "docker CLI not found"
docker version >/dev/null 2>&1 || die "no Docker Engine answers (start one: bash test/kit/engine.sh up)"
node_bin=$(command -v node) || die "node not found on PATH"
docker image inspect "$base" >/dev/null 2>&1 || die "base image $base is not present locally and cannot be pulled here.
  Build it with: bash test/kit/images.sh debian   (debootstrap from Debian's archive, no registry)
  or set CAPSTAN_AGENT_BASE_IMAGE to any local glibc-based Debian/Ubuntu image (node needs glibc and libstdc++)."

version=$(node -e 'process.stdout.write(require(process.argv[1]).version)' "$repo/agent/package.json")
[[ $version =~ ^[0-9A-Za-z][0-9A-Za-z.+_-]*$ ]] || die "unexpected agent version '$version'"
tag="$repo_name:$version"

say "compiling agent and shared (tsc -b agent)"
(cd "$repo" && npx --no-install tsc -b agent) >&2
[ -f "$repo/agent/dist/main.js" ] || die "build output agent/dist/main.js missing"
[ -f "$repo/shared/dist/index.js" ] || die "build output shared/dist/index.js missing"

ctx=$(mktemp -d /tmp/capstan-agent-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
app=$ctx/app
mkdir -p "$app/agent" "$app/shared"

# The app tree mirrors the workspace layout, so the @capstan/* links in node_modules resolve.
cp "$repo/agent/package.json" "$app/agent/"
cp -R "$repo/agent/bin" "$repo/agent/dist" "$app/agent/"
cp "$repo/shared/package.json" "$app/shared/"
cp -R "$repo/shared/dist" "$app/shared/"
printf '{"name":"capstan-agent-image","private":true,"type":"module"}\n' >"$app/package.json"
# No test files or source maps in the image.
find "$app" \( -name '*.test.*' -o -name '*.map' -o -name '*.tsbuildinfo' \) -type f -delete

# Production dependency closure, as installed in this checkout (no registry access needed).
say "collecting production node_modules"
mapfile -t deps < <(cd "$repo" && npm ls --omit=dev --all --parseable -w agent 2>/dev/null \
  | sed -n "s|^$repo/||p" | grep '^node_modules/' | grep -v '^node_modules/@capstan/' | sort -u)
[ "${#deps[@]}" -gt 0 ] || die "npm ls found no production dependencies (run npm ci first)"
for d in dockerode socket.io-client systeminformation tar zod; do
  # No pipe into `grep -q` here: under pipefail, grep leaving early gives printf a SIGPIPE and a false "missing".
  [[ " ${deps[*]} " == *" node_modules/$d "* ]] || die "dependency $d missing from the closure (run npm ci first)"
done
tar -C "$repo" -cf - "${deps[@]}" | tar -C "$app" -xf -
mkdir -p "$app/node_modules/@capstan"
ln -s ../../shared "$app/node_modules/@capstan/shared"

cp "$node_bin" "$ctx/node"

cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base
# Compose for compose deployments: Debian's docker-compose (v1, talks to the mounted socket).
# git + openssh-client (+ CA certificates for https remotes) for deployments from git sources.
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose git openssh-client ca-certificates >/dev/null && rm -rf /var/lib/apt/lists/*
COPY node /usr/local/bin/node
COPY app /opt/capstan-agent
# Fails the build if node cannot run on this base (glibc/libstdc++) or a module is missing.
RUN node --version && git --version && ssh -V && cd /opt/capstan-agent && node -e "import('./agent/dist/main.js').then(() => console.log('agent modules load'))"
ENV NODE_ENV=production \\
    CAPSTAN_AGENT_STATE_DIR=/var/lib/capstan-agent \\
    DOCKER_SOCKET=/var/run/docker.sock
VOLUME /var/lib/capstan-agent
LABEL org.opencontainers.image.title="capstan-agent" \\
      org.opencontainers.image.version="$version" \\
      capstan.component="agent"
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/opt/capstan-agent/agent/bin/capstan-agent.js"]
DOCKERFILE

say "building $tag from $base"
# --network host only for apt (Debian's archive); FROM uses the local image, nothing is pulled.
docker build --network host -t "$tag" -t "$repo_name:latest" "$ctx" >&2
say "built $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
echo "$tag"
