#!/usr/bin/env bash
# cargo-hack, for .ci/steps/feature-powerset.sh: installed into ~/.cargo/bin from crates.io when
# missing (under a minute of compiling once; a no-op afterwards).
set -euo pipefail
version=0.6.46
if cargo hack --version 2>/dev/null | grep -qx "cargo-hack $version"; then
  exit 0
fi
cargo install cargo-hack --version "$version" --locked
