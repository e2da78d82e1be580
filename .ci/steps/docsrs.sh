#!/usr/bin/env bash
# The crates' docs as docs.rs builds them (`--cfg docsrs`, every feature): each feature-gated
# item is marked with the feature it needs (`doc_cfg`, which docs.rs's nightly has and marks
# every `#[cfg]`-gated item with). `#![cfg_attr(docsrs, feature(doc_cfg))]` keeps normal stable
# builds free of the nightly feature; RUSTC_BOOTSTRAP lets this stable toolchain build the
# docs.rs variant. Checked on one item per crate with features. About half a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
# In the main target folder, whose dependencies the tests and `cargo doc` already built (the
# docs.rs variant replaces the plain docs there).
doc="${CARGO_TARGET_DIR:-target}"
RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="--cfg docsrs -D warnings" \
  cargo doc --locked --no-deps --all-features -p seawall -p seawall-tower -p seawall-audit
check() {  # FILE FEATURE
  if ! grep -oE 'Available on <strong>crate features? .{0,300}</strong> only' "$doc/doc/$1" \
      | grep -q "<code>$2</code>"; then
    echo "docsrs: $1 does not say it needs feature $2"
    exit 1
  fi
}
check seawall/grpc/index.html grpc
check seawall_tower/client/reqwest/struct.ReqwestService.html reqwest
check seawall_tower/server/idempotency/store/postgres/struct.PostgresStore.html postgres
check seawall_audit/simulate/index.html simulate
echo "docsrs: feature-gated items are marked"
