#!/usr/bin/env bash
# Test hosts: containers from capstan-test/dind, each with its own Docker engine,
# on one bridge network, so tests get several real "servers" on one machine.
# usage: test/kit/hosts.sh up N PREFIX        fresh hosts PREFIX-1..N on PREFIX-net; prints "NAME IP" each
#                                             (HOSTS_DOCKERD_ARGS: extra dockerd flags of the inner engines)
#        test/kit/hosts.sh load NAME IMAGE... copies local images into host NAME
#        test/kit/hosts.sh down PREFIX        removes hosts PREFIX-* and PREFIX-net
# Inside a host: its own dockerd (overlay2 on tmpfs, so it starts empty), node 20,
# curl. Hosts reach each other by name or IP; containers inside a host reach
# other hosts by IP only (names resolve in the hosts themselves, not below).
set -euo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
. "$kit/lib.sh"

# --privileged fails on these machines; this set is what lets dockerd run inside.
RUN_FLAGS=(--cap-add ALL --cap-drop SYS_RESOURCE
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined
  -v /sys/fs/cgroup:/sys/fs/cgroup --tmpfs /var/lib/docker:exec)

usage() { sed -n 's/^# usage: //p; s/^#        //p' "$0" >&2; exit 2; }

ip_of() { docker inspect -f "{{(index .NetworkSettings.Networks \"$2\").IPAddress}}" "$1"; }

down() {
  local prefix=$1 ids d
  mapfile -t ids < <(docker ps -aq --filter label=capstan.test=1 --filter "label=capstan.test.prefix=$prefix")
  [ ${#ids[@]} -eq 0 ] || docker rm -f -v "${ids[@]}" >/dev/null
  ! docker network inspect "$prefix-net" >/dev/null 2>&1 || remove_network "$prefix-net"
  # Inner containers killed with their host leave empty cgroups behind (see images.sh).
  for d in /sys/fs/cgroup/capstan-test/"$prefix"-* /sys/fs/cgroup/*/capstan-test/"$prefix"-*; do
    [ ! -d "$d" ] || find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

up() {
  local n=$1 prefix=$2 i name
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number, got '$n'"
  "$kit/images.sh" dind
  down "$prefix"
  # Inner engines resolve through this machine's resolvers (see the dind entrypoint).
  local dns
  dns=$(awk '$1 == "nameserver" && $2 !~ /^127\./ && $2 != "::1" {print $2}' /etc/resolv.conf | paste -sd, -)
  docker network create --label capstan.test=1 --label "capstan.test.prefix=$prefix" "$prefix-net" >/dev/null
  for ((i = 1; i <= n; i++)); do
    name=$prefix-$i
    docker run -d --name "$name" --hostname "$name" --network "$prefix-net" \
      --label capstan.test=1 --label "capstan.test.prefix=$prefix" -e "DOCKERD_DNS=$dns" \
      -e "DOCKERD_ARGS=${HOSTS_DOCKERD_ARGS:-}" \
      "${RUN_FLAGS[@]}" capstan-test/dind:latest >/dev/null
  done
  local deadline=$((SECONDS + 90))
  for ((i = 1; i <= n; i++)); do
    name=$prefix-$i
    until docker exec "$name" docker version >/dev/null 2>&1; do
      if [ "$(docker inspect -f '{{.State.Running}}' "$name")" != true ]; then
        docker logs --tail 20 "$name" >&2; die "$name stopped before its engine answered"
      fi
      ((SECONDS < deadline)) || { docker logs --tail 20 "$name" >&2; die "$name: inner engine did not answer in 90 s"; }
      sleep 0.5
    done
  done
  for ((i = 1; i <= n; i++)); do echo "$prefix-$i $(ip_of "$prefix-$i" "$prefix-net")"; done
}

load() {
  local name=$1; shift
  say "loading $* into $name"
  docker save "$@" | docker exec -i "$name" docker load >&2
}

case "${1:-}" in
  up) [ $# -eq 3 ] || usage; up "$2" "$3" ;;
  load) [ $# -ge 3 ] || usage; shift; load "$@" ;;
  down) [ $# -eq 2 ] || usage; down "$2" ;;
  *) usage ;;
esac
