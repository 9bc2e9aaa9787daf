#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server for tests and prints its DATABASE_URL.
# Installs PostgreSQL from Debian's archive when the machine has none.
# usage: test/services/postgres.sh start [PORT] | stop [PORT]
set -euo pipefail
action=${1:-start}
port=${2:-55432}
dir=/tmp/capstan-pg-$port

pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
  if [ -z "$d" ] || [ ! -x "$d/postgres" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq postgresql >/dev/null
    d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
  fi
  echo "$d"
}

case "$action" in
  start)
    bin=$(pg_bin)
    if [ -f "$dir/data/postmaster.pid" ] && "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
      echo "postgresql://capstan@127.0.0.1:$port/capstan"
      exit 0
    fi
    rm -rf "$dir"; mkdir -p "$dir"; chown postgres: "$dir"
    runuser -u postgres -- "$bin/initdb" -D "$dir/data" -U capstan --auth=trust -E UTF8 >/dev/null
    runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=300" start >/dev/null
    runuser -u postgres -- "$bin/createdb" -h 127.0.0.1 -p "$port" -U capstan capstan
    echo "postgresql://capstan@127.0.0.1:$port/capstan"
    ;;
  stop)
    bin=$(pg_bin)
    [ -d "$dir/data" ] && runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop [PORT]" >&2; exit 2 ;;
esac
