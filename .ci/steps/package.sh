#!/usr/bin/env bash
# Every publishable crate packages, and each package builds from what it ships
# (`cargo package --workspace`: the crates packaged together, path dependencies resolved to the
# packages being made). The warnings that each test, bench and example left out of a package is
# "ignored" are expected (the include lists keep tests and their data in the repository) and
# filtered out.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
# A package folder left by an earlier run can hold stale .crate files that the verification
# would build against: start from none.
# Cargo also keeps the sources it extracted from that local registry (under a registry folder
# named for its path, which has no host name) and does not extract a same-version crate again.
rm -rf "${CARGO_TARGET_DIR:-target}/package" "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/seawall*
# The verification builds the packaged crates as registry crates, which cargo never rebuilds for
# a changed source of the same version: forget the earlier builds of seawall's crates. Their
# dependencies are reused from the tests' build (the same target folder, and the workspace's
# dev profile, which packaged crates do not carry): about 90 s instead of about 280 s from
# nothing. (Run by hand, the next build of the workspace rebuilds seawall's own crates.)
target="${CARGO_TARGET_DIR:-target}"
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
rm -rf "$target"/debug/.fingerprint/seawall* "$target"/debug/deps/*seawall*
log="$(mktemp)"
trap 'rm -f "$log"; rm -rf "$target/package"' EXIT
if ! cargo package --workspace --locked > "$log" 2>&1; then
  grep -vE '^warning: ignoring (test|benchmark|example)|^\s+(Compiling|Packaging|Archiving|Verifying|Downloaded|Updating)' "$log" | tail -n 60
  echo "package: FAILED"
  exit 1
fi
grep -E '^\s+Packaged' "$log" || true
echo "package: $(grep -cE '^\s+Packaged' "$log") crates packaged and verified in $(( $(date +%s) - start )) s"
