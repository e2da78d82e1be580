#!/usr/bin/env bash
# Debian's prometheus (the server and promtool): `detect --prometheus` tests start a real server,
# the alert tests run promtool check/test rules, and the proxy tests promtool check metrics.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends prometheus
# The package starts a service on :9090 where systemd runs; the tests start their own.
command -v systemctl >/dev/null && systemctl stop prometheus 2>/dev/null || true
