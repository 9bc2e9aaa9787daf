#!/usr/bin/env bash
# Removes everything the tests made on the local engine: every container, network
# and volume labelled capstan.test=1, and nothing else. Images stay (they are a cache).
# usage: test/kit/cleanup.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

docker version >/dev/null 2>&1 || exit 0   # no engine, nothing to clean
f=(--filter label=capstan.test=1)
mapfile -t ids < <(docker ps -aq "${f[@]}");     [ ${#ids[@]} -eq 0 ] || docker rm -f -v "${ids[@]}" >/dev/null
mapfile -t ids < <(docker network ls -q "${f[@]}"); for id in "${ids[@]}"; do remove_network "$id"; done
mapfile -t ids < <(docker volume ls -q "${f[@]}");  [ ${#ids[@]} -eq 0 ] || docker volume rm -f "${ids[@]}" >/dev/null
# Empty cgroups left by test hosts' inner containers (see images.sh); rmdir only removes empty ones.
for d in /sys/fs/cgroup/capstan-test /sys/fs/cgroup/*/capstan-test; do
  [ ! -d "$d" ] || find "$d" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
done
