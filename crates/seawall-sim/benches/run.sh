#!/usr/bin/env bash
# Engine speed with its anchor, in one run: the Rust engine on the catalog (cargo bench), then
# the SimPy model of `bronson` under `naive`. Installs simpy into target/simpy-venv if missing.
#
#   bash crates/seawall-sim/benches/run.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv=target/simpy-venv
if ! "$venv/bin/python" -c 'import simpy' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet simpy
fi
# bronson:600 is the anchor pair: 600 simulated seconds, long enough to time both engines well.
cargo bench -p seawall-sim --bench engine -- bronson bronson:600 verify reconnect-herd \
  | tee target/sim-bench.txt
"$venv/bin/python" crates/seawall-sim/benches/bronson_simpy.py 1 600 | tee target/simpy-bench.txt
rust=$(awk '$1=="bronson:600" && $2=="naive" {print $4}' target/sim-bench.txt)
simpy=$(python3 -c 'import json,sys; print(json.load(open("target/simpy-bench.txt"))["wall_s"])')
python3 -c "print(f'bronson/naive, 600 s simulated, wall: seawall-sim {float($rust):.4f} s, SimPy {float($simpy):.3f} s, ratio {float($simpy)/float($rust):.0f}x')"
