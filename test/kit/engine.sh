#!/usr/bin/env bash
# Makes sure a local Docker engine answers on /var/run/docker.sock.
# Fresh CI machines have neither the engine nor systemd, so it installs Debian's
# docker.io and starts dockerd itself.
# usage: test/kit/engine.sh up
set -euo pipefail

. "$(dirname "$0")/lib.sh"
log=/var/log/capstan-dockerd.log

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# alive PID [NAME]: kill -0 is not enough, as nothing may reap a dead daemon
# here and a zombie still "exists"; NAME guards against a reused pid.
alive() {
  local comm state
  read -r _ comm state _ 2>/dev/null <"/proc/$1/stat" || return 1
  [ "$state" != Z ] && { [ -z "${2:-}" ] || [ "$comm" = "($2)" ]; }
}

up() {
  answers && return 0
  # Test workers may call this in parallel: only one of them installs and starts.
  exec 9>/var/lock/capstan-engine.lock
  flock -w 300 9 || die "timed out waiting for another engine.sh"
  answers && return 0

  { command -v dockerd && command -v docker; } >/dev/null || apt_install docker.io

  local pid
  pid=$(cat /var/run/docker.pid 2>/dev/null || true)
  if [ -z "$pid" ] || ! alive "$pid" dockerd; then
    # A daemon killed uncleanly leaves pid files behind; a stale one for
    # containerd makes the next dockerd wait 15 s for a containerd that is gone.
    rm -f /var/run/docker.pid
    local cpid
    cpid=$(cat /var/run/docker/containerd/containerd.pid 2>/dev/null || true)
    if [ -z "$cpid" ] || ! alive "$cpid" containerd; then rm -f /var/run/docker/containerd/containerd.pid; fi
    say "starting dockerd (log: $log)"
    # setsid: the daemon must outlive the test process that started it. Every descriptor
    # above stderr is closed first: the daemon must not inherit, and so hold forever, a lock
    # its caller took (`flock FILE cmd` passes the lock on fd 3, the script's own on fd 9).
    (
      for fd in /proc/$BASHPID/fd/*; do
        n=${fd##*/}
        if [ "$n" -gt 2 ]; then eval "exec $n>&-"; fi
      done
      exec setsid dockerd --host unix:///var/run/docker.sock </dev/null >>"$log" 2>&1
    ) &
    pid=$!
  fi

  local deadline=$((SECONDS + 60))
  until answers; do
    alive "$pid" || { tail -n 20 "$log" >&2; die "dockerd exited (log: $log)"; }
    ((SECONDS < deadline)) || { tail -n 20 "$log" >&2; die "dockerd did not answer within 60 s (log: $log)"; }
    sleep 0.5
  done
  say "up: $(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')"
}

case "${1:-}" in
  up) up ;;
  *) echo "usage: $0 up" >&2; exit 2 ;;
esac
