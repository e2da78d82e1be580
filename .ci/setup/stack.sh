#!/usr/bin/env bash
# HAProxy, nginx and wrk (Debian's packages): the third-party retriers of the example stack
# (crates/seawall-lab/stack/, crates/seawall-lab/tests/stack_third_party.rs). Installs only
# what is missing.
set -euo pipefail
missing=()
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v wrk >/dev/null || missing+=(wrk)
[ ${#missing[@]} -eq 0 ] && exit 0
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
# Debian starts the services it installs; the tests start their own on free ports.
for s in haproxy nginx; do
    if printf '%s\n' "${missing[@]}" | grep -qx "$s"; then
        service "$s" stop >/dev/null 2>&1 || true
    fi
done
