# shellcheck shell=bash
# Shared helpers for the test kit; sourced, not run.
say() { echo "${0##*/}: $*" >&2; }
die() { say "$*"; exit 1; }

# apt's own output is long; keep it in a log and show its tail only on failure.
apt_install() {
  local log=/var/log/capstan-kit-apt.log
  export DEBIAN_FRONTEND=noninteractive
  say "apt-get install $*"
  if ! { apt-get update -qq && apt-get install -y -qq "$@"; } >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "apt-get install $* failed (full log: $log)"
  fi
}

# Tests may have attached other containers (a proxy, the control plane) to a
# kit network; they are disconnected so the network can go.
remove_network() {
  local c
  for c in $(docker network inspect -f '{{range $id, $e := .Containers}}{{$id}} {{end}}' "$1"); do
    docker network disconnect -f "$1" "$c"
  done
  docker network rm "$1" >/dev/null
}
