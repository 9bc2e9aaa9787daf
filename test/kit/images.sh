#!/usr/bin/env bash
# Builds the local base images the tests use, each only when it is missing or
# its recipe changed. No registry is reachable, so everything is made from
# Debian packages. Prints progress to stderr only.
# usage: test/kit/images.sh [NAME...]      (default: all; names below)
# Adding an image: write image_NAME (builds capstan-test/NAME:latest), add NAME
# to ALL, and its parent images to DEPS.
set -euo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
. "$kit/lib.sh"

ALL=(busybox debian dind caddy node python go static registry postgres mariadb redis keydb-standin dragonfly-standin clickhouse)
declare -A DEPS=([dind]=debian [caddy]=debian [node]=debian [python]=debian [go]=debian [static]="debian busybox" [registry]=debian
  [postgres]=debian [mariadb]=debian [redis]=debian [keydb-standin]=redis [dragonfly-standin]=redis [clickhouse]=debian)
cache=/var/cache/capstan-test
buildlog=/var/log/capstan-kit-images.log

tag() { echo "capstan-test/$1:latest"; }

# Runs a build step with its chatter in the log; shows the tail if it fails.
quiet() {
  if ! "$@" >>"$buildlog" 2>&1; then
    tail -n 30 "$buildlog" >&2
    die "failed: $* (full log: $buildlog)"
  fi
}

# docker build with Debian's archive reachable from RUN steps; $1 = context dir.
build() {
  quiet docker build --network host --label "capstan.kit.recipe=$key" -t "$(tag "$name")" "$1"
}

image_busybox() {
  # Only the static build runs in an image with no libc.
  dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || apt_install busybox-static
  local root=$work/root applet
  mkdir -p "$root"/{bin,etc,root,tmp,var/www,usr}
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
  done
  # Scripts and tools look in /usr/bin and /sbin too (#!/usr/bin/env ...).
  ln -s bin "$root/sbin"; ln -s ../bin "$root/usr/bin"; ln -s ../bin "$root/usr/sbin"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  tar -C "$root" --numeric-owner -c . | quiet docker import \
    --change 'CMD ["sh"]' --change "LABEL capstan.kit.recipe=$key" - "$(tag busybox)"
}

image_debian() {
  # debootstrap takes 30-120 s; keep its result across runs, named by this
  # recipe's key so that a changed recipe does not reuse an old rootfs.
  local tarball=$cache/debian-bookworm-minbase-$key.tar
  if [ ! -s "$tarball" ]; then
    rm -f "$cache"/debian-bookworm-minbase*.tar
    command -v debootstrap >/dev/null || apt_install debootstrap
    local root=$work/rootfs
    say "debootstrap bookworm (minbase)"
    quiet debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian
    rm -rf "${root:?}"/var/cache/apt/archives/*.deb "${root:?}"/var/lib/apt/lists/* "${root:?}"/dev/*
    # debootstrap lists only "bookworm"; add the same updates and security suites as the machine.
    cat >"$root/etc/apt/sources.list" <<'LIST'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
LIST
    mkdir -p "$cache"
    tar -C "$root" --numeric-owner -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  fi
  quiet docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' --change "LABEL capstan.kit.recipe=$key" \
    "$tarball" "$(tag debian)"
}

# A "test host": a container with its own Docker engine and the host's node,
# so the agent can run inside it.
stamp_dind() { node --version; }
image_dind() {
  local ctx=$work/ctx
  mkdir -p "$ctx"
  # The host's Node 20 rather than Debian's 18: the project needs >= 20.
  cp "$(command -v node)" "$ctx/node"
  cat >"$ctx/entrypoint.sh" <<'SH'
#!/bin/sh
# Starts this test host's own engine, then runs the command (or idles).
set -eu
# overlay2 works on the tmpfs at /var/lib/docker. The host's cgroup tree is
# shared, so inner containers get a cgroup parent of their own: when this host
# is removed with containers still running, cleanup.sh can find and rmdir them.
# Our resolv.conf names only Docker's 127.0.0.11, which dockerd drops for its
# containers and then falls back to public resolvers this machine must not use:
# hosts.sh passes the machine's own resolvers; without them lookups fail locally.
dns=
for ip in $(echo "${DOCKERD_DNS:-127.0.0.1}" | tr , ' '); do dns="$dns --dns $ip"; done
dockerd --host unix:///var/run/docker.sock --storage-driver "${DOCKERD_STORAGE_DRIVER:-overlay2}" \
  --cgroup-parent "${DOCKERD_CGROUP_PARENT:-/capstan-test/$(hostname)}" $dns \
  ${DOCKERD_ARGS:-} >/var/log/dockerd.log 2>&1 &
i=0
until docker version >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt 120 ]; then tail -n 20 /var/log/dockerd.log >&2; echo "inner dockerd did not answer in 60 s" >&2; exit 1; fi
  sleep 0.5
done
[ "$#" -gt 0 ] && exec "$@"
exec sleep infinity
SH
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM capstan-test/debian:latest
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends docker.io iptables iproute2 procps ca-certificates curl xz-utils libstdc++6 openssh-server \
 && rm -rf /var/lib/apt/lists/*
COPY node /usr/local/bin/node
COPY entrypoint.sh /usr/local/bin/capstan-host-entrypoint
RUN chmod 755 /usr/local/bin/capstan-host-entrypoint && node --version
# tini (a docker.io dependency) as PID 1 reaps zombies and passes SIGTERM to dockerd too.
ENTRYPOINT ["tini", "-g", "--", "/usr/local/bin/capstan-host-entrypoint"]
DOCKERFILE
  build "$ctx"
}

image_caddy() {
  local ctx=$work/ctx
  mkdir -p "$ctx"
  cat >"$ctx/entrypoint.sh" <<'SH'
#!/bin/sh
# Caddy 2.6 ignores CADDY_ADMIN, so the admin address goes in through a boot config.
# --resume prefers the config last loaded through the API (survives restarts).
set -eu
[ "$#" -gt 0 ] && exec "$@"
printf '{"admin":{"listen":"%s"}}\n' "$CADDY_ADMIN" >/run/caddy-boot.json
exec caddy run --config /run/caddy-boot.json --resume
SH
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM capstan-test/debian:latest
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends caddy ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY entrypoint.sh /usr/local/bin/capstan-caddy-entrypoint
RUN chmod 755 /usr/local/bin/capstan-caddy-entrypoint && caddy version
ENV CADDY_ADMIN=localhost:2019 XDG_CONFIG_HOME=/config XDG_DATA_HOME=/data
ENTRYPOINT ["/usr/local/bin/capstan-caddy-entrypoint"]
DOCKERFILE
  build "$ctx"
}

# An image of capstan-test/debian with Debian packages: apt-get install PACKAGES, clean
# up, then run CHECK (a command proving they work); any further Dockerfile lines follow.
# usage: debian_packages "PACKAGES" "CHECK" [DOCKERFILE LINE...]
debian_packages() {
  local ctx=$work/ctx line
  mkdir -p "$ctx"
  {
    printf '%s\n' "FROM capstan-test/debian:latest" "ENV DEBIAN_FRONTEND=noninteractive" \
      "RUN apt-get update \\" \
      " && apt-get install -y --no-install-recommends $1 \\" \
      " && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* \\" \
      " && $2"
    shift 2
    for line in "$@"; do printf '%s\n' "$line"; done
  } >"$ctx/Dockerfile"
  build "$ctx"
}

image_node() { debian_packages "nodejs npm" "node --version && npm --version"; }

# python3-venv brings ensurepip's bundled pip, so `python3 -m venv` works offline.
image_python() { debian_packages "python3 python3-venv" "python3 --version"; }

# ca-certificates: the builder copies the CA bundle into the runtime stage, as golang:1.22 has one.
image_go() { debian_packages "golang-go ca-certificates" "go version"; }

image_static() {
  local ctx=$work/ctx
  mkdir -p "$ctx"
  # Debian's Caddy on busybox: the binary needs only glibc and its loader, copied
  # along, which keeps the image near caddy:2-alpine's size.
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM capstan-test/debian:latest AS caddy
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends caddy \
 && mkdir /out \
 && cp -L --parents /usr/bin/caddy $(ldd /usr/bin/caddy | grep -o '/[^ ]*') /out/
FROM capstan-test/busybox:latest
COPY --from=caddy /out/usr/bin/caddy /bin/caddy
COPY --from=caddy /out/lib /lib
COPY --from=caddy /out/lib64 /lib64
ENV XDG_CONFIG_HOME=/config XDG_DATA_HOME=/data
RUN caddy version
DOCKERFILE
  build "$ctx"
}

# A container registry (Debian's docker-registry, distribution 2.8) for the
# build-server tests, with htpasswd (apache2-utils) to make its bcrypt logins.
# Configured through REGISTRY_* variables (e.g. REGISTRY_AUTH=htpasswd).
image_registry() {
  debian_packages "docker-registry apache2-utils" "docker-registry --version" \
    "ENV REGISTRY_HTTP_ADDR=0.0.0.0:5000 REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY=/var/lib/registry" \
    "EXPOSE 5000" \
    'CMD ["docker-registry", "serve", "/etc/docker/registry/config.yml"]'
}

# --- Database engines (agent/src/databases, test/e2e/agent-databases.test.ts) ---------------
# Debian's packages behind entrypoints that follow the official images' conventions (env
# names, data dirs, tool names, running as the engine's user), so the agent's engine table is
# exercised as it is in production. The data dirs stay empty in the image: a new named volume
# is filled from the image's content at the mount point, which would otherwise pre-seed it.

# The official images' <VAR>_FILE convention: the variable's value is read from the named file
# (as root, before the entrypoint drops to the server's user); setting both is an error.
file_env_function() {
  cat <<'SH'
file_env() {
  local var=$1 file=${1}_FILE
  if [ -n "${!var:-}" ] && [ -n "${!file:-}" ]; then
    echo "error: both $var and $file are set (but are exclusive)" >&2
    exit 1
  fi
  if [ -n "${!file:-}" ]; then export "$var=$(<"${!file}")"; fi
  unset "$file"
}
SH
}

# PostgreSQL 15 like postgres:*: initdb on an empty $PGDATA with POSTGRES_USER / _PASSWORD
# (or _PASSWORD_FILE) / _DB (password from a file descriptor, never argv), password auth for
# network clients, listening on all addresses, server run as postgres; psql / pg_dump /
# pg_isready on PATH.
image_postgres() {
  mkdir -p "$work/ctx"
  {
    printf '#!/bin/bash\nset -Eeuo pipefail\n'
    file_env_function
    cat <<'SH'
if [ "${1:0:1}" = '-' ]; then set -- postgres "$@"; fi
if [ "$1" = postgres ]; then file_env POSTGRES_PASSWORD; fi
if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
fi
if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_USER:=postgres}"
  : "${POSTGRES_DB:=$POSTGRES_USER}"
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "error: database is uninitialized and POSTGRES_PASSWORD is not set" >&2
    exit 1
  fi
  initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") -D "$PGDATA"
  printf '\nhost all all all %s\n' "${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}" >>"$PGDATA/pg_hba.conf"
  # A temporary server on the socket only: nothing reaches it over the network before it is ready.
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --no-psqlrc --no-password --username "$POSTGRES_USER" --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
  fi
  pg_ctl -D "$PGDATA" -m fast -w stop
  echo "PostgreSQL init process complete; ready for start up."
fi
exec "$@"
SH
  } >"$work/ctx/entrypoint.sh"
  debian_packages "postgresql-15" \
    "pg_dropcluster 15 main && rm -rf /var/lib/postgresql/15 && mkdir -p /var/lib/postgresql/data && chown postgres:postgres /var/lib/postgresql/data && chmod 700 /var/lib/postgresql/data && sed -ri \"s!^#?(listen_addresses)\\s*=\\s*\\S+.*!\\1 = '*'!\" /usr/share/postgresql/15/postgresql.conf.sample && grep -qF \"listen_addresses = '*'\" /usr/share/postgresql/15/postgresql.conf.sample" \
    "ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PGDATA=/var/lib/postgresql/data LANG=C.UTF-8" \
    "COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh" \
    "RUN chmod 755 /usr/local/bin/docker-entrypoint.sh && postgres --version && psql --version && pg_dump --version && pg_isready --version" \
    'ENTRYPOINT ["docker-entrypoint.sh"]' "STOPSIGNAL SIGINT" "EXPOSE 5432" 'CMD ["postgres"]'
}

# MariaDB 10.11 like mariadb:*: MARIADB_* variables with the MYSQL_* names as fallbacks (the
# tests use it for the agent's mysql path too), root@'%' with the root password, the user with
# all rights on its database, server run as mysql; mariadb / mariadb-dump / mariadb-admin and
# the mysql / mysqldump / mysqladmin names.
image_mariadb() {
  mkdir -p "$work/ctx"
  {
    printf '#!/bin/bash\nset -Eeuo pipefail\n'
    file_env_function
    cat <<'SH'
for v in ROOT_PASSWORD PASSWORD; do file_env "MARIADB_$v"; file_env "MYSQL_$v"; done
for v in ROOT_PASSWORD ROOT_HOST USER PASSWORD DATABASE ALLOW_EMPTY_ROOT_PASSWORD RANDOM_ROOT_PASSWORD; do
  m=MARIADB_$v y=MYSQL_$v
  if [ -z "${!m:-}" ] && [ -n "${!y:-}" ]; then export "$m=${!y}"; fi
done
if [ -z "${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-}" ] && [ -n "${MYSQL_ALLOW_EMPTY_PASSWORD:-}" ]; then export MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=$MYSQL_ALLOW_EMPTY_PASSWORD; fi
if [ "${1:0:1}" = '-' ]; then set -- mariadbd "$@"; fi
if [ "$1" = mariadbd ] || [ "$1" = mysqld ]; then
  if [ "$(id -u)" = 0 ]; then
    mkdir -p /var/lib/mysql /run/mysqld
    find /var/lib/mysql /run/mysqld \! -user mysql -exec chown mysql:mysql '{}' +
    exec setpriv --reuid=mysql --regid=mysql --init-groups "$BASH_SOURCE" "$@"
  fi
  if [ ! -d /var/lib/mysql/mysql ]; then
    if [ -z "${MARIADB_ROOT_PASSWORD:-}" ] && [ -z "${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-}" ] && [ -z "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ]; then
      echo "error: database is uninitialized and MARIADB_ROOT_PASSWORD is not set" >&2
      exit 1
    fi
    if [ "${MARIADB_USER:-}" = root ]; then
      echo 'error: MARIADB_USER="root" is not allowed; MARIADB_USER and MARIADB_PASSWORD are for a regular user' >&2
      exit 1
    fi
    if [ -n "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ]; then
      MARIADB_ROOT_PASSWORD=$(head -c 24 /dev/urandom | base64)
      echo "GENERATED ROOT PASSWORD: $MARIADB_ROOT_PASSWORD"
    fi
    mariadb-install-db --datadir=/var/lib/mysql --rpm --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve
    sock=/run/mysqld/mysqld.sock
    "$@" --skip-networking --socket="$sock" &
    pid=$!
    for i in $(seq 60); do
      mariadb-admin --socket="$sock" -uroot ping >/dev/null 2>&1 && break
      [ "$i" = 60 ] && { echo "error: temporary server did not start" >&2; exit 1; }
      sleep 0.5
    done
    str() { local s=${1//\\/\\\\}; printf "'%s'" "${s//\'/\\\'}"; }
    ident() { printf '`%s`' "${1//\`/\`\`}"; }
    root_host=${MARIADB_ROOT_HOST:-%}
    {
      echo "SET @@SESSION.SQL_LOG_BIN=0;"
      echo "DROP USER IF EXISTS root@'127.0.0.1', root@'::1';"
      echo "EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\\'', @@hostname, '\\'');"
      echo "SET PASSWORD FOR 'root'@'localhost' = PASSWORD($(str "${MARIADB_ROOT_PASSWORD:-}"));"
      if [ "$root_host" != localhost ]; then
        echo "CREATE USER 'root'@$(str "$root_host") IDENTIFIED BY $(str "${MARIADB_ROOT_PASSWORD:-}");"
        echo "GRANT ALL ON *.* TO 'root'@$(str "$root_host") WITH GRANT OPTION;"
      fi
      if [ -n "${MARIADB_DATABASE:-}" ]; then echo "CREATE DATABASE IF NOT EXISTS $(ident "$MARIADB_DATABASE");"; fi
      if [ -n "${MARIADB_USER:-}" ] && [ -n "${MARIADB_PASSWORD:-}" ]; then
        echo "CREATE USER $(str "$MARIADB_USER")@'%' IDENTIFIED BY $(str "$MARIADB_PASSWORD");"
        if [ -n "${MARIADB_DATABASE:-}" ]; then echo "GRANT ALL ON $(ident "$MARIADB_DATABASE").* TO $(str "$MARIADB_USER")@'%';"; fi
      fi
    } | mariadb --protocol=socket --socket="$sock" -uroot --database=mysql
    kill "$pid"
    wait "$pid" || true
    echo "MariaDB init process done. Ready for start up."
  fi
fi
exec "$@"
SH
  } >"$work/ctx/entrypoint.sh"
  printf '[mariadbd]\nbind-address = 0.0.0.0\nskip-name-resolve\n' >"$work/ctx/99-capstan-test.cnf"
  debian_packages "mariadb-server mariadb-client" \
    "rm -rf /var/lib/mysql && mkdir -p /var/lib/mysql /run/mysqld && chown mysql:mysql /var/lib/mysql /run/mysqld && for n in mysql:mariadb mysqldump:mariadb-dump mysqladmin:mariadb-admin; do command -v \${n%%:*} >/dev/null || ln -s \${n#*:} /usr/bin/\${n%%:*}; done" \
    "COPY 99-capstan-test.cnf /etc/mysql/mariadb.conf.d/99-capstan-test.cnf" \
    "COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh" \
    "RUN chmod 755 /usr/local/bin/docker-entrypoint.sh && mariadbd --version && mariadb --version && mariadb-dump --version && mariadb-admin --version && mysql --version && mysqldump --version && mysqladmin --version" \
    'ENTRYPOINT ["docker-entrypoint.sh"]' "EXPOSE 3306" 'CMD ["mariadbd"]'
}

# Redis 7 like redis:*: CMD redis-server in WORKDIR /data; the entrypoint hands /data's files
# to the redis user and drops to it (so a config file copied into /data before start is
# readable by the server only).
redis_entrypoint() {
  # usage: redis_entrypoint SERVER USER > file (the entrypoint of redis:* and eqalpha/keydb)
  cat <<SH
#!/bin/sh
set -e
if [ "\${1#-}" != "\$1" ] || [ "\${1%.conf}" != "\$1" ]; then set -- $1 "\$@"; fi
if [ "\$1" = $1 ] && [ "\$(id -u)" = 0 ]; then
  find . \\! -user $2 -exec chown $2 '{}' +
  exec setpriv --reuid=$2 --regid=$2 --init-groups "\$0" "\$@"
fi
[ "\$(umask)" != 0022 ] || umask 0077
exec "\$@"
SH
}
image_redis() {
  mkdir -p "$work/ctx"
  redis_entrypoint redis-server redis >"$work/ctx/entrypoint.sh"
  debian_packages "redis-server redis-tools" \
    "rm -rf /data && mkdir /data && chown redis:redis /data" \
    "COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh" \
    "RUN chmod 755 /usr/local/bin/docker-entrypoint.sh && redis-server --version && redis-cli --version" \
    "WORKDIR /data" 'ENTRYPOINT ["docker-entrypoint.sh"]' "EXPOSE 6379" 'CMD ["redis-server"]'
}

# NOT KeyDB (absent from Debian): a stand-in with Redis 7's binaries under KeyDB's names and
# eqalpha/keydb's layout (keydb-server /etc/keydb/keydb.conf, keydb-cli, /data, user keydb),
# so the agent's keydb code path runs somewhere. Tests using it say so.
image_keydb-standin() {
  mkdir -p "$work/ctx"
  redis_entrypoint keydb-server keydb >"$work/ctx/entrypoint.sh"
  printf 'dir /data\nprotected-mode no\n' >"$work/ctx/keydb.conf"
  cat >"$work/ctx/Dockerfile" <<'DOCKERFILE'
FROM capstan-test/redis:latest
RUN groupadd -r keydb && useradd -r -g keydb keydb && chown keydb:keydb /data \
 && ln -s /usr/bin/redis-server /usr/local/bin/keydb-server && ln -s /usr/bin/redis-cli /usr/local/bin/keydb-cli
COPY keydb.conf /etc/keydb/keydb.conf
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 755 /usr/local/bin/docker-entrypoint.sh && keydb-server --version && keydb-cli --version
LABEL capstan.test.standin="keydb: redis-server and redis-cli from Debian under keydb names"
CMD ["keydb-server", "/etc/keydb/keydb.conf"]
DOCKERFILE
  build "$work/ctx"
}

# NOT Dragonfly (absent from Debian): a stand-in with Dragonfly's image layout (entrypoint.sh
# dropping to user dfly, CMD dragonfly --logtostderr, /data, redis-cli for probes) whose
# `dragonfly` runs redis-server configured from the DFLY_<flag> variables Dragonfly reads
# (port, dir, requirepass), --flag=value arguments and the --flag=value lines of a
# --flagfile (abseil's format); other flags are ignored. The config file lives in a private
# temp dir (mode 600).
image_dragonfly-standin() {
  mkdir -p "$work/ctx"
  cat >"$work/ctx/entrypoint.sh" <<'SH'
#!/bin/sh
set -e
if [ "${1#-}" != "$1" ]; then set -- dragonfly --logtostderr "$@"; fi
if [ "$1" = dragonfly ] && [ "$(id -u)" = 0 ]; then
  exec setpriv --reuid=dfly --regid=dfly --init-groups "$0" "$@"
fi
exec "$@"
SH
  cat >"$work/ctx/dragonfly" <<'SH'
#!/bin/sh
set -eu
port=${DFLY_port:-6379} dir=${DFLY_dir:-/data} pass=${DFLY_requirepass:-}
flag() {
  case $1 in
    --port=*) port=${1#--port=} ;;
    --dir=*) dir=${1#--dir=} ;;
    --requirepass=*) pass=${1#--requirepass=} ;;
  esac
}
for a in "$@"; do
  case $a in
    --flagfile=*) while IFS= read -r line || [ -n "$line" ]; do flag "$line"; done <"${a#--flagfile=}" ;;
    *) flag "$a" ;;
  esac
done
umask 077
conf=$(mktemp -d)/redis.conf
{
  echo "port $port"
  echo "dir $dir"
  echo "protected-mode no"
  if [ -n "$pass" ]; then printf 'requirepass "%s"\n' "$(printf '%s' "$pass" | sed 's/[\\"]/\\&/g')"; fi
} >"$conf"
echo "dragonfly stand-in: redis-server $(redis-server --version | cut -d' ' -f3) on port $port"
exec redis-server "$conf"
SH
  cat >"$work/ctx/Dockerfile" <<'DOCKERFILE'
FROM capstan-test/redis:latest
RUN groupadd -r dfly && useradd -r -g dfly dfly && chown dfly:dfly /data
COPY entrypoint.sh /usr/local/bin/entrypoint.sh
COPY dragonfly /usr/local/bin/dragonfly
RUN chmod 755 /usr/local/bin/entrypoint.sh /usr/local/bin/dragonfly && redis-cli --version
LABEL capstan.test.standin="dragonfly: redis-server from Debian configured from DFLY_* variables"
ENTRYPOINT ["entrypoint.sh"]
CMD ["dragonfly", "--logtostderr"]
DOCKERFILE
  build "$work/ctx"
}

# ClickHouse 18.16 (Debian's; the official image is 24+) like clickhouse/clickhouse-server:
# CLICKHOUSE_USER / _PASSWORD (stored as SHA-256) / _DB, listening on all addresses, server
# run as clickhouse, data in /var/lib/clickhouse. The official client reads CLICKHOUSE_USER /
# CLICKHOUSE_PASSWORD from the environment (22.3+); 18.16's does not, so the entrypoint writes
# them into the client's own config file (root only, mode 600) for probes run with docker exec.
# 18.16 has no access management: CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT is ignored.
image_clickhouse() {
  mkdir -p "$work/ctx"
  cat >"$work/ctx/entrypoint.sh" <<'SH'
#!/bin/bash
set -Eeuo pipefail
if [ "$#" -gt 0 ] && [ "$1" != clickhouse-server ]; then exec "$@"; fi
user=${CLICKHOUSE_USER:-default}
pass=${CLICKHOUSE_PASSWORD:-}
db=${CLICKHOUSE_DB:-}
# bash 5.2 would put the matched text where a replacement says "&".
shopt -u patsub_replacement 2>/dev/null || true
xml() { local s=${1//&/&amp;}; s=${s//</&lt;}; s=${s//>/&gt;}; s=${s//\"/&quot;}; printf '%s' "${s//\'/&apos;}"; }
case $user in *[!A-Za-z0-9_]*|'') echo "error: CLICKHOUSE_USER must be letters, digits and _" >&2; exit 1 ;; esac
mkdir -p /var/lib/clickhouse /var/log/clickhouse-server /etc/clickhouse-server/users.d /etc/clickhouse-client
find /var/lib/clickhouse /var/log/clickhouse-server \! -user clickhouse -exec chown clickhouse:clickhouse '{}' +
hash=$(printf '%s' "$pass" | sha256sum | cut -d' ' -f1)
{
  echo "<yandex><users>"
  # default exists in users.xml (its plain <password> goes); another name is a new user.
  if [ "$user" = default ]; then echo "<default><password remove=\"remove\"/>"; else echo "<default remove=\"remove\"/><$user>"; fi
  echo "<profile>default</profile><quota>default</quota><networks replace=\"replace\"><ip>::/0</ip></networks>"
  echo "<password_sha256_hex>$hash</password_sha256_hex></$user>"
  echo "</users></yandex>"
} >/etc/clickhouse-server/users.d/default-user.xml
chown root:clickhouse /etc/clickhouse-server/users.d/default-user.xml
chmod 640 /etc/clickhouse-server/users.d/default-user.xml
( umask 077; printf '<config><user>%s</user><password>%s</password></config>\n' "$user" "$(xml "$pass")" >/etc/clickhouse-client/config.xml )
server=(setpriv --reuid=clickhouse --regid=clickhouse --init-groups clickhouse-server --config-file=/etc/clickhouse-server/config.xml)
if [ -n "$db" ] && [ ! -e /var/lib/clickhouse/.capstan-initialized ]; then
  "${server[@]}" -- --listen_host=127.0.0.1 &
  pid=$!
  for i in $(seq 60); do
    clickhouse-client --query "SELECT 1" >/dev/null 2>&1 && break
    [ "$i" = 60 ] && { echo "error: temporary server did not start" >&2; exit 1; }
    sleep 0.5
  done
  clickhouse-client --query "CREATE DATABASE IF NOT EXISTS \`${db//\`/\\\`}\`"
  kill "$pid"
  wait "$pid" || true
  touch /var/lib/clickhouse/.capstan-initialized
  echo "ClickHouse init process done. Ready for start up."
fi
exec "${server[@]}"
SH
  printf '<yandex><listen_host>0.0.0.0</listen_host><logger><console>1</console></logger></yandex>\n' >"$work/ctx/docker.xml"
  debian_packages "clickhouse-server clickhouse-client" \
    "rm -rf /var/lib/clickhouse/* && clickhouse-client --version" \
    "COPY docker.xml /etc/clickhouse-server/config.d/docker.xml" \
    "COPY entrypoint.sh /usr/local/bin/entrypoint.sh" \
    "RUN chmod 755 /usr/local/bin/entrypoint.sh" \
    'ENTRYPOINT ["entrypoint.sh"]' "EXPOSE 8123 9000" 'CMD ["clickhouse-server"]'
}

# Changes whenever the recipe, a parent image or a stamp (e.g. node version) does.
recipe_key() {
  local name=$1 dep helper
  {
    declare -f "image_$name"
    # A recipe made with a shared helper changes when the helper does.
    for helper in debian_packages redis_entrypoint; do
      # A string match, not `| grep -q`: under pipefail an early grep exit would read as "not used".
      if [[ $(declare -f "image_$name") == *"$helper"* ]]; then declare -f "$helper"; fi
    done
    ! declare -F "stamp_$name" >/dev/null || "stamp_$name"
    for dep in ${DEPS[$name]:-}; do docker image inspect -f '{{.Id}}' "$(tag "$dep")"; done
  } | sha256sum | cut -c1-16
}

ensure() {
  local name=$1 dep key have work
  declare -F "image_$name" >/dev/null || die "unknown image '$name' (known: ${ALL[*]})"
  for dep in ${DEPS[$name]:-}; do ensure "$dep"; done
  key=$(recipe_key "$name")
  have=$(docker image inspect -f '{{index .Config.Labels "capstan.kit.recipe"}}' "$(tag "$name")" 2>/dev/null || true)
  [ "$have" = "$key" ] && return 0
  say "building $(tag "$name")${have:+ (recipe changed)}"
  local start=$SECONDS old
  old=$(docker image inspect -f '{{.Id}}' "$(tag "$name")" 2>/dev/null || true)
  work=$(mktemp -d /tmp/capstan-kit-image.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  "image_$name"
  rm -rf "$work"; trap - EXIT
  # The replaced image would stay behind untagged; it may still be in use, so best effort.
  [ -z "$old" ] || docker rmi "$old" >/dev/null 2>&1 || true
  say "built $(tag "$name") in $((SECONDS - start)) s"
}

"$kit/engine.sh" up
# Parallel test workers must not build the same image twice at once.
exec 9>/var/lock/capstan-images.lock
flock -w 900 9 || die "timed out waiting for another images.sh"
names=("$@"); [ $# -gt 0 ] || names=("${ALL[@]}")
for name in "${names[@]}"; do ensure "$name"; done
