#!/usr/bin/env bash
# cargo-fuzz, for .ci/steps/fuzz.sh: installed into ~/.cargo/bin from crates.io when missing
# (about two minutes of compiling once; a no-op afterwards).
set -euo pipefail
version=0.13.2
if cargo fuzz --version 2>/dev/null | grep -qx "cargo-fuzz $version"; then
  exit 0
fi
cargo install cargo-fuzz --version "$version" --locked
