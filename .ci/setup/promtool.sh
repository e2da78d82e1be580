#!/usr/bin/env bash
# promtool (Debian's prometheus package): checks the Prometheus text seawall serves
# (crates/seawall-lab/tests/proxy_http.rs). Installs only when missing.
set -euo pipefail
command -v promtool >/dev/null && exit 0
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus
