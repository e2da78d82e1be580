#!/usr/bin/env bash
# seawall-tower builds with every feature on its own, and with none (cargo-hack's feature
# powerset to depth 1, installed by .ci/setup/cargo-hack.sh): an item used under a feature that
# does not enable what it needs fails here, where the workspace build (which unifies features,
# and where clippy and the tests run with all of them) would hide it. `cargo check` of the
# library only. SEAWALL_POWERSET_DEPTH=2 adds every pair (78 feature sets, about 6 minutes on
# 2 cores with other builds beside it: more than CI's budget leaves; run it by hand).
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! cargo hack check --locked -p seawall-tower --lib --feature-powerset --depth "${SEAWALL_POWERSET_DEPTH:-1}" \
    > "$log" 2>&1; then
  grep -vE '^\s+(Compiling|Checking|Finished|Blocking)' "$log" | tail -n 60
  echo "feature-powerset: FAILED"
  exit 1
fi
echo "feature-powerset: $(grep -c '^info: running' "$log") feature sets checked in $(( $(date +%s) - start )) s"
