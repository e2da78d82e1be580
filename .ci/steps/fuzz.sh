#!/usr/bin/env bash
# Builds every fuzz target in fuzz/ and runs each for a short bounded time from its committed
# seed corpus (fuzz/corpus/TARGET). A crash, a failed property or an input slower than the
# per-input timeout fails the step, leaving the reproducer in fuzz/artifacts/TARGET/.
#
# Sanitizers are off (`-s none`): the crates forbid unsafe code, and what the targets look for
# is panics, failed properties, overflow and hangs. Without a sanitizer cargo-fuzz passes rustc
# only stable flags; RUSTC_BOOTSTRAP=1 is set so that `-s address` (a `-Z` flag) also works on
# the stable toolchain. `--dev` (no optimisation; debug assertions and overflow checks on)
# because here the build is most of the step's time; the long runs in fuzz/README.md use the
# optimised build.
#
# SEAWALL_FUZZ_SECONDS sets the time per target (default 5; .ci/run sets 3).
set -euo pipefail
cd "$(dirname "$0")/../../fuzz"
export RUSTC_BOOTSTRAP=1
secs="${SEAWALL_FUZZ_SECONDS:-5}"
flags=(-s none --dev)

start=$(date +%s)
cargo fuzz build "${flags[@]}"
echo "fuzz: built in $(( $(date +%s) - start )) s"

# New inputs go to a scratch corpus, so the committed seeds stay as they are.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in $(cargo fuzz list); do
  mkdir -p "$scratch/$target"
  if ! cargo fuzz run "${flags[@]}" "$target" "$scratch/$target" "corpus/$target" -- \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      > "$scratch/$target.log" 2>&1; then
    tail -n 40 "$scratch/$target.log"
    echo "fuzz: $target FAILED; reproducer(s): $(ls "artifacts/$target" 2>/dev/null | tr '\n' ' ')"
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$target.log" | grep -o '[0-9]*$')
  echo "fuzz: $target ok, ${runs:-?} executions in ${secs} s"
done
echo "fuzz: all targets done in $(( $(date +%s) - start )) s"
