#!/bin/sh
# Capstan proxy entrypoint (same behaviour as capstan-test/caddy in test/kit/images.sh).
# Caddy 2.6 ignores CADDY_ADMIN, so the admin address goes in through a boot config.
# The agent sets CADDY_ADMIN=127.0.0.1:2019: the admin API is reachable only from inside this
# container's network namespace, where the agent runs `caddy reload` with docker exec.
# --resume prefers the config last loaded through the API (survives restarts).
set -eu
[ "$#" -gt 0 ] && exec "$@"
printf '{"admin":{"listen":"%s"}}\n' "$CADDY_ADMIN" >/run/caddy-boot.json
exec caddy run --config /run/caddy-boot.json --resume
