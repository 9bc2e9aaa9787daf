#!/usr/bin/env bash
# End-to-end check of the kit on this machine: engine, images, two test hosts,
# an image moved into a host, and a web server in one host reached from the
# other over the hosts' network. Leaves nothing labelled behind.
# usage: test/kit/selftest.sh            (prints "selftest: ok" and step timings)
set -euo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
. "$kit/lib.sh"
prefix=capkit-selftest
trap '"$kit/hosts.sh" down "$prefix" || true' EXIT

step() { local t=$SECONDS; "$@"; say "$(printf '%3d s' $((SECONDS - t)))  ${*#"$kit/"}"; }

step "$kit/engine.sh" up
step "$kit/images.sh"
t=$SECONDS; hosts=$("$kit/hosts.sh" up 2 "$prefix"); say "$(printf '%3d s' $((SECONDS - t)))  hosts.sh up 2 $prefix"
echo "$hosts" >&2
ip1=$(awk 'NR == 1 {print $2}' <<<"$hosts")
for h in "$prefix-1" "$prefix-2"; do step "$kit/hosts.sh" load "$h" capstan-test/busybox:latest; done

[ "$(docker exec "$prefix-1" docker run --rm capstan-test/busybox:latest echo ok)" = ok ] || die "inner docker run failed"
docker exec "$prefix-1" sh -c 'mkdir -p /srv/www && echo "hello from $(hostname)" >/srv/www/index.html'
docker exec "$prefix-1" docker run -d -p 8080:80 -v /srv/www:/www capstan-test/busybox:latest httpd -f -p 80 -h /www >/dev/null
want="hello from $prefix-1"
# Host to host by name, and from a container inside host 2 by IP (busybox's wget
# has no working -T in Debian 12: it segfaults; timeout bounds it instead).
for _ in $(seq 1 20); do
  got=$(docker exec "$prefix-2" curl -fsS --max-time 2 "http://$prefix-1:8080/" 2>/dev/null || true)
  [ "$got" = "$want" ] && break; sleep 0.5
done
[ "$got" = "$want" ] || die "host 2 could not reach host 1's web server (got '$got')"
got=$(docker exec "$prefix-2" docker run --rm capstan-test/busybox:latest timeout 5 wget -qO- "http://$ip1:8080/")
[ "$got" = "$want" ] || die "a container in host 2 could not reach host 1 (got '$got')"

step "$kit/hosts.sh" down "$prefix"
step "$kit/cleanup.sh"
left=$(docker ps -aq --filter label=capstan.test=1; docker network ls -q --filter label=capstan.test=1
  docker volume ls -q --filter label=capstan.test=1)
[ -z "$left" ] || die "labelled objects left behind: $left"
echo "selftest: ok"
