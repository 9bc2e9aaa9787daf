#!/usr/bin/env bash
# Debian's Chromium for the browser suite (test/browser/), installed when missing: playwright-core
# drives /usr/bin/chromium (`npx playwright install` cannot download browsers on these machines).
# Idempotent; progress on stderr only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../kit/lib.sh"
[ -x /usr/bin/chromium ] && exit 0
# Several apt runs at once (the Docker kit prepares in the background) wait for dpkg's lock.
flock /tmp/capstan-apt.lock bash -c ". '$here/../kit/lib.sh'; [ -x /usr/bin/chromium ] || apt_install -o DPkg::Lock::Timeout=600 chromium"
[ -x /usr/bin/chromium ] || die "chromium did not install"
