#!/usr/bin/env bash
# Installs the command-line tools the suites drive directly on this machine, from Debian's
# archive, when missing: git (test repositories, git daemon, git http-backend), sshd (an SSH
# git server on loopback for deploy-key clones) and docker-compose (compose deployments by
# an agent running on this machine). Idempotent; prints progress to stderr only.
# sshd is only ever started by the tests themselves, on loopback with their own config:
# a policy-rc.d that refuses service starts keeps the package from starting a system sshd.
set -euo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
. "$kit/lib.sh"

missing=()
command -v git >/dev/null || missing+=(git)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null || missing+=(openssh-client)
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
[ ${#missing[@]} -eq 0 ] && exit 0

added_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  added_policy=1
fi
trap '[ -n "$added_policy" ] && rm -f /usr/sbin/policy-rc.d' EXIT
apt_install "${missing[@]}"
