#!/usr/bin/env bash
# Makes sure a local Docker engine answers on /var/run/docker.sock.
# Fresh CI machines have neither the engine nor systemd, so it installs Debian's
# docker.io and starts dockerd itself.
# usage: test/kit/engine.sh up
set -euo pipefail

. "$(dirname "$0")/lib.sh"
log=/var/log/capstan-dockerd.log

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

up() {
  answers && return 0
  # Test workers may call this in parallel: only one of them installs and starts.
  exec 9>/var/lock/capstan-engine.lock
  flock -w 300 9 || die "timed out waiting for another engine.sh"
  answers && return 0

  { command -v dockerd && command -v docker; } >/dev/null || apt_install docker.io

  local pid
  pid=$(cat /var/run/docker.pid 2>/dev/null || true)
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    # A dockerd killed uncleanly leaves pid files that stop the next one starting.
    rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
    say "starting dockerd (log: $log)"
    # setsid: the daemon must outlive the test process that started it.
    setsid dockerd --host unix:///var/run/docker.sock </dev/null >>"$log" 2>&1 &
    pid=$!
  fi

  local deadline=$((SECONDS + 60))
  until answers; do
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; die "dockerd exited (log: $log)"; }
    ((SECONDS < deadline)) || { tail -n 20 "$log" >&2; die "dockerd did not answer within 60 s (log: $log)"; }
    sleep 0.5
  done
  say "up: $(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')"
}

case "${1:-}" in
  up) up ;;
  *) echo "usage: $0 up" >&2; exit 2 ;;
esac
