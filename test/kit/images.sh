#!/usr/bin/env bash
# Builds the local base images the tests use, each only when it is missing or
# its recipe changed. No registry is reachable, so everything is made from
# Debian packages. Prints progress to stderr only.
# usage: test/kit/images.sh [NAME...]      (default: all; names below)
# Adding an image: write image_NAME (builds capstan-test/NAME:latest), add NAME
# to ALL, and its parent images to DEPS.
set -euo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
. "$kit/lib.sh"

ALL=(busybox debian dind caddy node python go static registry)
declare -A DEPS=([dind]=debian [caddy]=debian [node]=debian [python]=debian [go]=debian [static]="debian busybox" [registry]=debian)
cache=/var/cache/capstan-test
buildlog=/var/log/capstan-kit-images.log

tag() { echo "capstan-test/$1:latest"; }

# Runs a build step with its chatter in the log; shows the tail if it fails.
quiet() {
  if ! "$@" >>"$buildlog" 2>&1; then
    tail -n 30 "$buildlog" >&2
    die "failed: $* (full log: $buildlog)"
  fi
}

# docker build with Debian's archive reachable from RUN steps; $1 = context dir.
build() {
  quiet docker build --network host --label "capstan.kit.recipe=$key" -t "$(tag "$name")" "$1"
}

image_busybox() {
  # Only the static build runs in an image with no libc.
  dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || apt_install busybox-static
  local root=$work/root applet
  mkdir -p "$root"/{bin,etc,root,tmp,var/www,usr}
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
  done
  # Scripts and tools look in /usr/bin and /sbin too (#!/usr/bin/env ...).
  ln -s bin "$root/sbin"; ln -s ../bin "$root/usr/bin"; ln -s ../bin "$root/usr/sbin"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  tar -C "$root" --numeric-owner -c . | quiet docker import \
    --change 'CMD ["sh"]' --change "LABEL capstan.kit.recipe=$key" - "$(tag busybox)"
}

image_debian() {
  # debootstrap takes 30-120 s; keep its result across runs, named by this
  # recipe's key so that a changed recipe does not reuse an old rootfs.
  local tarball=$cache/debian-bookworm-minbase-$key.tar
  if [ ! -s "$tarball" ]; then
    rm -f "$cache"/debian-bookworm-minbase*.tar
    command -v debootstrap >/dev/null || apt_install debootstrap
    local root=$work/rootfs
    say "debootstrap bookworm (minbase)"
    quiet debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian
    rm -rf "${root:?}"/var/cache/apt/archives/*.deb "${root:?}"/var/lib/apt/lists/* "${root:?}"/dev/*
    # debootstrap lists only "bookworm"; add the same updates and security suites as the machine.
    cat >"$root/etc/apt/sources.list" <<'LIST'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
LIST
    mkdir -p "$cache"
    tar -C "$root" --numeric-owner -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  fi
  quiet docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' --change "LABEL capstan.kit.recipe=$key" \
    "$tarball" "$(tag debian)"
}

# A "test host": a container with its own Docker engine and the host's node,
# so the agent can run inside it.
stamp_dind() { node --version; }
image_dind() {
  local ctx=$work/ctx
  mkdir -p "$ctx"
  # The host's Node 20 rather than Debian's 18: the project needs >= 20.
  cp "$(command -v node)" "$ctx/node"
  cat >"$ctx/entrypoint.sh" <<'SH'
#!/bin/sh
# Starts this test host's own engine, then runs the command (or idles).
set -eu
# overlay2 works on the tmpfs at /var/lib/docker. The host's cgroup tree is
# shared, so inner containers get a cgroup parent of their own: when this host
# is removed with containers still running, cleanup.sh can find and rmdir them.
# Our resolv.conf names only Docker's 127.0.0.11, which dockerd drops for its
# containers and then falls back to public resolvers this machine must not use:
# hosts.sh passes the machine's own resolvers; without them lookups fail locally.
dns=
for ip in $(echo "${DOCKERD_DNS:-127.0.0.1}" | tr , ' '); do dns="$dns --dns $ip"; done
dockerd --host unix:///var/run/docker.sock --storage-driver "${DOCKERD_STORAGE_DRIVER:-overlay2}" \
  --cgroup-parent "${DOCKERD_CGROUP_PARENT:-/capstan-test/$(hostname)}" $dns \
  ${DOCKERD_ARGS:-} >/var/log/dockerd.log 2>&1 &
i=0
until docker version >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt 120 ]; then tail -n 20 /var/log/dockerd.log >&2; echo "inner dockerd did not answer in 60 s" >&2; exit 1; fi
  sleep 0.5
done
[ "$#" -gt 0 ] && exec "$@"
exec sleep infinity
SH
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM capstan-test/debian:latest
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends docker.io iptables iproute2 procps ca-certificates curl xz-utils libstdc++6 openssh-server \
 && rm -rf /var/lib/apt/lists/*
COPY node /usr/local/bin/node
COPY entrypoint.sh /usr/local/bin/capstan-host-entrypoint
RUN chmod 755 /usr/local/bin/capstan-host-entrypoint && node --version
# tini (a docker.io dependency) as PID 1 reaps zombies and passes SIGTERM to dockerd too.
ENTRYPOINT ["tini", "-g", "--", "/usr/local/bin/capstan-host-entrypoint"]
DOCKERFILE
  build "$ctx"
}

image_caddy() {
  local ctx=$work/ctx
  mkdir -p "$ctx"
  cat >"$ctx/entrypoint.sh" <<'SH'
#!/bin/sh
# Caddy 2.6 ignores CADDY_ADMIN, so the admin address goes in through a boot config.
# --resume prefers the config last loaded through the API (survives restarts).
set -eu
[ "$#" -gt 0 ] && exec "$@"
printf '{"admin":{"listen":"%s"}}\n' "$CADDY_ADMIN" >/run/caddy-boot.json
exec caddy run --config /run/caddy-boot.json --resume
SH
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM capstan-test/debian:latest
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends caddy ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY entrypoint.sh /usr/local/bin/capstan-caddy-entrypoint
RUN chmod 755 /usr/local/bin/capstan-caddy-entrypoint && caddy version
ENV CADDY_ADMIN=localhost:2019 XDG_CONFIG_HOME=/config XDG_DATA_HOME=/data
ENTRYPOINT ["/usr/local/bin/capstan-caddy-entrypoint"]
DOCKERFILE
  build "$ctx"
}

# An image of capstan-test/debian with Debian packages: apt-get install PACKAGES, clean
# up, then run CHECK (a command proving they work); any further Dockerfile lines follow.
# usage: debian_packages "PACKAGES" "CHECK" [DOCKERFILE LINE...]
debian_packages() {
  local ctx=$work/ctx line
  mkdir -p "$ctx"
  {
    printf '%s\n' "FROM capstan-test/debian:latest" "ENV DEBIAN_FRONTEND=noninteractive" \
      "RUN apt-get update \\" \
      " && apt-get install -y --no-install-recommends $1 \\" \
      " && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* \\" \
      " && $2"
    shift 2
    for line in "$@"; do printf '%s\n' "$line"; done
  } >"$ctx/Dockerfile"
  build "$ctx"
}

image_node() { debian_packages "nodejs npm" "node --version && npm --version"; }

# python3-venv brings ensurepip's bundled pip, so `python3 -m venv` works offline.
image_python() { debian_packages "python3 python3-venv" "python3 --version"; }

# ca-certificates: the builder copies the CA bundle into the runtime stage, as golang:1.22 has one.
image_go() { debian_packages "golang-go ca-certificates" "go version"; }

image_static() {
  local ctx=$work/ctx
  mkdir -p "$ctx"
  # Debian's Caddy on busybox: the binary needs only glibc and its loader, copied
  # along, which keeps the image near caddy:2-alpine's size.
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM capstan-test/debian:latest AS caddy
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends caddy \
 && mkdir /out \
 && cp -L --parents /usr/bin/caddy $(ldd /usr/bin/caddy | grep -o '/[^ ]*') /out/
FROM capstan-test/busybox:latest
COPY --from=caddy /out/usr/bin/caddy /bin/caddy
COPY --from=caddy /out/lib /lib
COPY --from=caddy /out/lib64 /lib64
ENV XDG_CONFIG_HOME=/config XDG_DATA_HOME=/data
RUN caddy version
DOCKERFILE
  build "$ctx"
}

# A container registry (Debian's docker-registry, distribution 2.8) for the
# build-server tests, with htpasswd (apache2-utils) to make its bcrypt logins.
# Configured through REGISTRY_* variables (e.g. REGISTRY_AUTH=htpasswd).
image_registry() {
  debian_packages "docker-registry apache2-utils" "docker-registry --version" \
    "ENV REGISTRY_HTTP_ADDR=0.0.0.0:5000 REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY=/var/lib/registry" \
    "EXPOSE 5000" \
    'CMD ["docker-registry", "serve", "/etc/docker/registry/config.yml"]'
}

# Changes whenever the recipe, a parent image or a stamp (e.g. node version) does.
recipe_key() {
  local name=$1 dep
  {
    declare -f "image_$name"
    # A recipe made with the shared helper changes when the helper does.
    if declare -f "image_$name" | grep -q debian_packages; then declare -f debian_packages; fi
    ! declare -F "stamp_$name" >/dev/null || "stamp_$name"
    for dep in ${DEPS[$name]:-}; do docker image inspect -f '{{.Id}}' "$(tag "$dep")"; done
  } | sha256sum | cut -c1-16
}

ensure() {
  local name=$1 dep key have work
  declare -F "image_$name" >/dev/null || die "unknown image '$name' (known: ${ALL[*]})"
  for dep in ${DEPS[$name]:-}; do ensure "$dep"; done
  key=$(recipe_key "$name")
  have=$(docker image inspect -f '{{index .Config.Labels "capstan.kit.recipe"}}' "$(tag "$name")" 2>/dev/null || true)
  [ "$have" = "$key" ] && return 0
  say "building $(tag "$name")${have:+ (recipe changed)}"
  local start=$SECONDS old
  old=$(docker image inspect -f '{{.Id}}' "$(tag "$name")" 2>/dev/null || true)
  work=$(mktemp -d /tmp/capstan-kit-image.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  "image_$name"
  rm -rf "$work"; trap - EXIT
  # The replaced image would stay behind untagged; it may still be in use, so best effort.
  [ -z "$old" ] || docker rmi "$old" >/dev/null 2>&1 || true
  say "built $(tag "$name") in $((SECONDS - start)) s"
}

"$kit/engine.sh" up
# Parallel test workers must not build the same image twice at once.
exec 9>/var/lock/capstan-images.lock
flock -w 900 9 || die "timed out waiting for another images.sh"
names=("$@"); [ $# -gt 0 ] || names=("${ALL[@]}")
for name in "${names[@]}"; do ensure "$name"; done
