#!/usr/bin/env bash
# Builds the Capstan reverse proxy image from local material only (no registry is contacted):
#   - base: a local Debian 12 image (CAPSTAN_PROXY_BASE_IMAGE, default capstan-test/debian:latest,
#     which `bash test/kit/images.sh debian` makes with debootstrap),
#   - Caddy from Debian's archive (package caddy, 2.6.x), plus ca-certificates for ACME,
#   - entrypoint.sh beside this script.
# Tags capstan/proxy:<caddy version> and capstan/proxy:latest (repository: CAPSTAN_PROXY_REPO).
# The agent runs it as the container capstan-proxy (agent/src/proxy); see docs/proxy.md.
# usage: deploy/proxy/build-image.sh            prints the versioned tag on stdout
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
base=${CAPSTAN_PROXY_BASE_IMAGE:-capstan-test/debian:latest}
repo_name=${CAPSTAN_PROXY_REPO:-capstan/proxy}

say() { echo "build-image.sh: $*" >&2; }
die() { say "$*"; exit 1; }

command -v docker >/dev/null || die "docker CLI not found"
docker version >/dev/null 2>&1 || die "no Docker Engine answers (start one: bash test/kit/engine.sh up)"
docker image inspect "$base" >/dev/null 2>&1 || die "base image $base is not present locally and cannot be pulled here.
  Build it with: bash test/kit/images.sh debian   (debootstrap from Debian's archive, no registry)
  or set CAPSTAN_PROXY_BASE_IMAGE to a local Debian 12 (bookworm) image."

ctx=$(mktemp -d /tmp/capstan-proxy-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp "$here/entrypoint.sh" "$ctx/entrypoint.sh"

cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \\
 && apt-get install -y -qq --no-install-recommends caddy ca-certificates >/dev/null \\
 && rm -rf /var/lib/apt/lists/*
COPY entrypoint.sh /usr/local/bin/capstan-proxy-entrypoint
RUN chmod 755 /usr/local/bin/capstan-proxy-entrypoint && caddy version
# Admin API on the container's loopback only; certificates in /data (a named volume), the
# autosaved config in /config.
ENV CADDY_ADMIN=127.0.0.1:2019 XDG_CONFIG_HOME=/config XDG_DATA_HOME=/data
EXPOSE 80/tcp 443/tcp 443/udp
LABEL org.opencontainers.image.title="capstan-proxy" capstan.component="proxy"
ENTRYPOINT ["/usr/local/bin/capstan-proxy-entrypoint"]
DOCKERFILE

say "building $repo_name from $base"
# --network host only for apt (Debian's archive); FROM uses the local image, nothing is pulled.
docker build --network host -t "$repo_name:latest" "$ctx" >&2
version=$(docker run --rm --entrypoint caddy "$repo_name:latest" version | awk '{print $1}' | sed 's/^v//')
[[ $version =~ ^[0-9A-Za-z][0-9A-Za-z.+_-]*$ ]] || die "unexpected caddy version '$version'"
docker tag "$repo_name:latest" "$repo_name:$version"
say "built $repo_name:$version"
echo "$repo_name:$version"
