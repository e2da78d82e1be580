#!/usr/bin/env bash
# The model-checked test of the budget window (crates/seawall/tests/window_model.rs): with
# `--cfg shuttle` its atomics are Shuttle's, which explores thread interleavings. The flag
# changes every crate's build, so it builds in a target folder of its own (about a minute the
# first time). Skipped, saying so, if the window no longer has a model test.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -e crates/seawall/tests/window_model.rs ]; then
  echo "shuttle: crates/seawall/tests/window_model.rs is gone; nothing to model-check"
  exit 0
fi
target="${CARGO_TARGET_DIR:-target}/shuttle"
# Removed when the step ends: CI starts from a clean clone, and the disk is shared.
trap 'rm -rf "$target"' EXIT
# The dev profile: the build is most of the step (about 35 s, against about 60 s optimised) and
# the 2 × 20 000 schedules run in about 15 s unoptimised.
RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR="$target" \
  cargo test --locked -p seawall --test window_model
