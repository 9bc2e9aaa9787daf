#!/bin/sh
# Installs (or reinstalls) the Capstan agent on this server: writes /etc/capstan-agent.env
# (mode 600) and runs the agent container with the Docker socket and a state volume mounted.
# Idempotent: an existing capstan-agent container is replaced; the state volume is kept.
#
# usage: install.sh --url https://capstan.example.com --token AGENT_TOKEN [--image IMAGE] [--systemd]
#   --url      the control plane's base URL (http or https)
#   --token    this server's agent token (from the control plane)
#   --image    agent image (default: $CAPSTAN_AGENT_IMAGE or capstan/agent:latest)
#   --systemd  supervise the container with systemd (capstan-agent.service, next to this
#              script) instead of Docker's --restart unless-stopped
# Environment: CAPSTAN_AGENT_IMAGE, CAPSTAN_AGENT_ENV_FILE (default /etc/capstan-agent.env).
set -eu

NAME=capstan-agent
VOLUME=capstan-agent-state
IMAGE=${CAPSTAN_AGENT_IMAGE:-capstan/agent:latest}
ENV_FILE=${CAPSTAN_AGENT_ENV_FILE:-/etc/capstan-agent.env}
UNIT_DIR=/etc/systemd/system
URL=
TOKEN=
MODE=docker

say() { printf 'install.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

while [ $# -gt 0 ]; do
  case $1 in
    --url) [ $# -ge 2 ] || die "--url needs a value"; URL=$2; shift 2 ;;
    --url=*) URL=${1#--url=}; shift ;;
    --token) [ $# -ge 2 ] || die "--token needs a value"; TOKEN=$2; shift 2 ;;
    --token=*) TOKEN=${1#--token=}; shift ;;
    --image) [ $# -ge 2 ] || die "--image needs a value"; IMAGE=$2; shift 2 ;;
    --image=*) IMAGE=${1#--image=}; shift ;;
    --systemd) MODE=systemd; shift ;;
    -h|--help) usage 0 ;;
    *) say "unknown argument: $1"; usage ;;
  esac
done

# Strict patterns: the values end up in an env file read by docker and systemd, and in argv.
# single_line VALUE: no newline (grep would test each line on its own).
single_line() { [ "$(printf '%s' "$1" | wc -l)" -eq 0 ]; }

[ -n "$URL" ] || die "--url is required"
if ! { single_line "$URL" && printf '%s\n' "$URL" | grep -Eqx \
  'https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?'; }; then
  die "--url must look like https://capstan.example.com[:port][/path] (no credentials, query or spaces)"
fi

[ -n "$TOKEN" ] || die "--token is required"
case $TOKEN in
  *[!A-Za-z0-9._~+/=-]*) die "--token may only contain A-Z a-z 0-9 . _ ~ + / = -" ;;
esac
if [ "${#TOKEN}" -lt 16 ] || [ "${#TOKEN}" -gt 200 ]; then die "--token must be 16 to 200 characters long"; fi

if ! { single_line "$IMAGE" && printf '%s\n' "$IMAGE" | grep -Eqx '[a-z0-9][a-z0-9._/:-]{0,254}(@sha256:[a-f0-9]{64})?'; }; then
  die "--image must be an image reference like capstan/agent:0.1.0"
fi

[ "$(id -u)" -eq 0 ] || die "run as root (writes $ENV_FILE, talks to the Docker Engine)"
command -v docker >/dev/null 2>&1 || die "docker is not installed"
docker version >/dev/null 2>&1 || die "the Docker Engine is not running (or not reachable from this user)"
[ -S /var/run/docker.sock ] || die "/var/run/docker.sock is missing: the agent drives the engine through it"

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "image $IMAGE is not on this server; pulling it"
  docker pull "$IMAGE" >&2 || die "image $IMAGE is not on this server and could not be pulled
  (copy it here with: docker save $IMAGE | ssh THIS_SERVER docker load, or build it with deploy/agent/build-image.sh)"
fi

# Env file: written whole, then renamed into place; never world-readable.
umask 077
env_dir=$(dirname "$ENV_FILE")
mkdir -p "$env_dir"
tmp=$(mktemp "$env_dir/.capstan-agent.env.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{
  echo "# Capstan agent; written by install.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf 'CAPSTAN_URL=%s\n' "$URL"
  printf 'CAPSTAN_AGENT_TOKEN=%s\n' "$TOKEN"
  printf 'CAPSTAN_AGENT_IMAGE=%s\n' "$IMAGE"
} >"$tmp"
chmod 600 "$tmp"
mv -f "$tmp" "$ENV_FILE"
trap - EXIT
say "wrote $ENV_FILE (mode 600)"

# Replace whatever runs now (either mode), keeping the state volume.
if command -v systemctl >/dev/null 2>&1 && [ -f "$UNIT_DIR/$NAME.service" ]; then
  systemctl stop "$NAME.service" >/dev/null 2>&1 || true
  if [ "$MODE" = docker ]; then
    systemctl disable "$NAME.service" >/dev/null 2>&1 || true
    rm -f "$UNIT_DIR/$NAME.service"
    systemctl daemon-reload || true
  fi
fi
if docker container inspect "$NAME" >/dev/null 2>&1; then
  say "replacing the existing $NAME container"
  docker rm -f "$NAME" >/dev/null
fi

if [ "$MODE" = systemd ]; then
  unit_src=$(dirname "$0")/$NAME.service
  [ -f "$unit_src" ] || die "--systemd needs $NAME.service next to install.sh"
  command -v systemctl >/dev/null 2>&1 || die "--systemd: systemctl not found"
  install -m 644 "$unit_src" "$UNIT_DIR/$NAME.service"
  if [ "$ENV_FILE" != /etc/capstan-agent.env ]; then
    sed -i "s|/etc/capstan-agent.env|$ENV_FILE|g" "$UNIT_DIR/$NAME.service"
  fi
  systemctl daemon-reload
  systemctl enable "$NAME.service" >/dev/null
  systemctl restart "$NAME.service"
  say "started $NAME.service (logs: journalctl -u $NAME -f)"
else
  id=$(docker run -d --name "$NAME" --restart unless-stopped --init \
    --label capstan.component=agent \
    -v /var/run/docker.sock:/var/run/docker.sock \
    -v "$VOLUME:/var/lib/capstan-agent" \
    --env-file "$ENV_FILE" \
    "$IMAGE")
  say "started container $NAME ($(printf '%.12s' "$id")); logs: docker logs -f $NAME"
fi
