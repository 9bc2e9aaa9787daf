#!/usr/bin/env bash
# Starts a real Docker Registry (Debian's docker-registry 2.8.2, the V2 API) on 127.0.0.1:PORT
# for tests and prints its URL, with either
#   basic: htpasswd authentication of one user, whose password is read from standard input
#          (never from argv: a process list shows argv), or
#   token: bearer tokens from REALM (a token server of the test), signed with the key of the
#          PEM certificate CERT (the JWT's x5c), for the service "capstan-test-registry" and the
#          issuer "capstan-test-issuer".
# Installs docker-registry and apache2-utils (htpasswd) from Debian's archive when missing.
# usage: test/services/registry.sh install
#        printf '%s' "$PASSWORD" | test/services/registry.sh start PORT basic USER
#        test/services/registry.sh start PORT token REALM CERT
#        test/services/registry.sh stop PORT
set -euo pipefail
action=${1:-}
port=${2:-}

ensure_installed() {
  if ! command -v docker-registry >/dev/null || ! command -v htpasswd >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq docker-registry apache2-utils >/dev/null
  fi
}

# scripts/test.sh installs once, before the two API runs that would both run apt-get at once.
if [ "$action" = install ]; then
  ensure_installed
  exit 0
fi
[ -n "$port" ] || { echo "usage: $0 start PORT basic USER | start PORT token REALM CERT | stop PORT" >&2; exit 2; }
dir=/tmp/capstan-registry-$port

stop() {
  if [ -f "$dir/pid" ]; then
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$(cat "$dir/pid")" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$dir"
}

case "$action" in
  start)
    mode=${3:-}
    ensure_installed
    stop
    mkdir -p "$dir/data"
    case "$mode" in
      basic)
        user=${4:-}
        [ -n "$user" ] || { echo "usage: $0 start PORT basic USER (password on stdin)" >&2; exit 2; }
        # bcrypt entries: the only hash docker-registry's htpasswd auth accepts.
        htpasswd -iBc "$dir/htpasswd" "$user" 2>/dev/null
        auth="  htpasswd:
    realm: capstan-test
    path: $dir/htpasswd"
        ;;
      token)
        realm=${4:-}; cert=${5:-}
        [ -n "$realm" ] && [ -f "$cert" ] || { echo "usage: $0 start PORT token REALM CERT" >&2; exit 2; }
        auth="  token:
    realm: $realm
    service: capstan-test-registry
    issuer: capstan-test-issuer
    rootcertbundle: $cert"
        ;;
      *) echo "usage: $0 start PORT basic USER | start PORT token REALM CERT" >&2; exit 2 ;;
    esac
    cat >"$dir/config.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
auth:
$auth
YAML
    setsid docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    for _ in $(seq 1 100); do
      code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/" || true)
      if [ "$code" = "401" ]; then echo "http://127.0.0.1:$port"; exit 0; fi
      sleep 0.1
    done
    echo "docker-registry did not answer on 127.0.0.1:$port:" >&2
    cat "$dir/log" >&2
    exit 1
    ;;
  stop) stop ;;
  *) echo "usage: $0 start PORT basic USER | start PORT token REALM CERT | stop PORT" >&2; exit 2 ;;
esac
