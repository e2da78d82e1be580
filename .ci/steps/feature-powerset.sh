#!/usr/bin/env bash
# seawall-tower builds with every feature on its own and every pair of features (cargo-hack's
# feature powerset to depth 2, installed by .ci/setup/cargo-hack.sh), with and without the
# defaults: an item used under a feature that does not enable what it needs fails here, where
# the workspace build (which unifies features) would hide it. `cargo check` of the library only.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! cargo hack check --locked -p seawall-tower --lib --feature-powerset --depth 2 \
    --exclude-features grpc-example > "$log" 2>&1; then
  grep -vE '^\s+(Compiling|Checking|Finished|Blocking)' "$log" | tail -n 60
  echo "feature-powerset: FAILED"
  exit 1
fi
echo "feature-powerset: $(grep -c '^info: running' "$log") feature sets checked in $(( $(date +%s) - start )) s"
