#!/usr/bin/env bash
# Starts a throwaway PowerDNS Authoritative server (sqlite3 backend, HTTP API) on loopback for
# tests and prints its API base URL. Installs pdns-server from Debian's archive when missing.
# The API key is the test-only value below (PDNS_TEST_API_KEY in the tests).
# usage: test/services/powerdns.sh install | start [DNS_PORT] [API_PORT] | stop [DNS_PORT]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
action=${1:-start}
port=${2:-55353}
api_port=${3:-$((port + 1))}
dir=/tmp/capstan-pdns-$port
api_key=capstan-test-pdns-key

ensure_installed() {
  if ! command -v pdns_server >/dev/null || [ ! -f /usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql ] || ! command -v sqlite3 >/dev/null || ! command -v curl >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends pdns-server pdns-backend-sqlite3 sqlite3 curl >/dev/null
  fi
}

answers() { curl -fsS -m 2 -H "X-API-Key: $api_key" "http://127.0.0.1:$api_port/api/v1/servers/localhost" >/dev/null 2>&1; }

case "$action" in
  install) ensure_installed ;;
  start)
    ensure_installed
    if [ -f "$dir/pdns.pid" ] && kill -0 "$(cat "$dir/pdns.pid")" 2>/dev/null && answers; then
      echo "http://127.0.0.1:$api_port"; exit 0
    fi
    [ -f "$dir/pdns.pid" ] && kill "$(cat "$dir/pdns.pid")" 2>/dev/null || true
    rm -rf "$dir"; mkdir -p "$dir"
    sqlite3 "$dir/pdns.sqlite3" < /usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql
    cat >"$dir/pdns.conf" <<CONF
launch=gsqlite3
gsqlite3-database=$dir/pdns.sqlite3
local-address=127.0.0.1
local-port=$port
socket-dir=$dir
api=yes
api-key=$api_key
webserver=yes
webserver-address=127.0.0.1
webserver-port=$api_port
webserver-allow-from=127.0.0.0/8
disable-syslog=yes
loglevel=3
CONF
    pdns_server --config-dir="$dir" --daemon=no --guardian=no >"$dir/log" 2>&1 &
    echo $! >"$dir/pdns.pid"
    for _ in $(seq 1 100); do answers && { echo "http://127.0.0.1:$api_port"; exit 0; }; sleep 0.1; done
    cat "$dir/log" >&2; echo "PowerDNS did not start" >&2; exit 1
    ;;
  stop)
    stop_server "$dir" pdns.pid
    ;;
  *) echo "usage: $0 install|start|stop [DNS_PORT] [API_PORT]" >&2; exit 2 ;;
esac
