#!/usr/bin/env bash
# Starts a throwaway Knot DNS server on loopback for tests: zone ZONE (default capstan.test),
# dynamic updates (RFC 2136) and zone transfers allowed with one TSIG key (hmac-sha256), and
# prints "server port key-name". Installs knot and knot-dnsutils from Debian when missing.
# The TSIG secret is the test-only value below (KNOT_TEST_TSIG_SECRET in the tests).
# usage: test/services/knot.sh install | start [PORT] [ZONE] | stop [PORT]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
action=${1:-start}
port=${2:-55363}
zone=${3:-capstan.test}
dir=/tmp/capstan-knot-$port
key_name=capstan-test-key
secret=c2VjcmV0LWNhcHN0YW4tdGVzdC10c2lnLWtleS0wMDA=

ensure_installed() {
  if ! command -v knotd >/dev/null || ! command -v kdig >/dev/null || ! command -v knsupdate >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends knot knot-dnsutils >/dev/null
  fi
}

answers() { kdig -p "$port" @127.0.0.1 +short +time=1 +retry=0 SOA "$zone" 2>/dev/null | grep -q .; }

case "$action" in
  install) ensure_installed ;;
  start)
    ensure_installed
    if [ -f "$dir/knot.pid" ] && kill -0 "$(cat "$dir/knot.pid")" 2>/dev/null && answers; then
      echo "127.0.0.1 $port $key_name"; exit 0
    fi
    [ -f "$dir/knot.pid" ] && kill "$(cat "$dir/knot.pid")" 2>/dev/null || true
    rm -rf "$dir"; mkdir -p "$dir/zones" "$dir/db"
    cat >"$dir/zones/$zone.zone" <<ZONE
\$ORIGIN $zone.
\$TTL 300
@ SOA ns1.$zone. hostmaster.$zone. 1 3600 600 86400 300
@ NS ns1.$zone.
ns1 A 127.0.0.1
ZONE
    cat >"$dir/knot.conf" <<CONF
server:
  listen: 127.0.0.1@$port
  rundir: $dir
log:
  - target: stderr
    any: warning
database:
  storage: $dir/db
key:
  - id: $key_name
    algorithm: hmac-sha256
    secret: $secret
acl:
  - id: capstan
    key: $key_name
    action: [update, transfer]
template:
  - id: default
    storage: $dir/zones
    file: "%s.zone"
    zonefile-sync: -1
    journal-content: all
zone:
  - domain: $zone
    acl: capstan
CONF
    knotd -c "$dir/knot.conf" >"$dir/log" 2>&1 &
    echo $! >"$dir/knot.pid"
    for _ in $(seq 1 100); do answers && { echo "127.0.0.1 $port $key_name"; exit 0; }; sleep 0.1; done
    cat "$dir/log" >&2; echo "Knot did not start" >&2; exit 1
    ;;
  stop)
    stop_server "$dir" knot.pid
    ;;
  *) echo "usage: $0 install|start|stop [PORT] [ZONE]" >&2; exit 2 ;;
esac
