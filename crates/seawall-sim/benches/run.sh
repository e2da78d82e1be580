#!/usr/bin/env bash
# Engine speed with its anchors, in one run: the Rust engine on the catalog (cargo bench), then
# the SimPy model of `bronson` under `naive`, then a minimal binary-heap DES of the same model
# (benches/bronson_heap.rs). Installs simpy into target/simpy-venv if missing.
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
# Wall time and CPU time of both sides. On a shared machine the CPU-time ratio is the one to
# quote: wall time of a 0.1 s run and of a 20 s run sample different moments of the load.
rust=$(awk '$1=="bronson:600" && $2=="naive" {print $5}' target/sim-bench.txt)
rust_cpu=$(awk '$1=="bronson:600" && $2=="naive" {print $9}' target/sim-bench.txt)
simpy=$(python3 -c 'import json; print(json.load(open("target/simpy-bench.txt"))["wall_s"])')
simpy_cpu=$(python3 -c 'import json; print(json.load(open("target/simpy-bench.txt"))["cpu_s"])')
python3 -c "print(f'bronson/naive, 600 s simulated: seawall-sim {float($rust):.4f} s wall, {float($rust_cpu):.4f} s CPU; SimPy {float($simpy):.3f} s wall, {float($simpy_cpu):.3f} s CPU; ratio {float($simpy)/float($rust):.0f}x wall, {float($simpy_cpu)/float($rust_cpu):.0f}x CPU')"
cargo bench -p seawall-sim --bench bronson_heap -- 1 600 | tee target/heap-bench.txt
heap=$(python3 -c 'import json; print(json.load(open("target/heap-bench.txt"))["wall_s"])')
heap_cpu=$(python3 -c 'import json; print(json.load(open("target/heap-bench.txt"))["cpu_s"])')
heap_eps=$(python3 -c 'import json; print(json.load(open("target/heap-bench.txt"))["events_per_s"])')
rust_eps=$(awk '$1=="bronson:600" && $2=="naive" {print $6}' target/sim-bench.txt)
python3 -c "print(f'bronson/naive, 600 s simulated: seawall-sim {float($rust):.4f} s ({float($rust_eps)/1e6:.1f} M events/s), minimal heap DES {float($heap):.4f} s ({float($heap_eps)/1e6:.1f} M events/s); seawall-sim / heap: {float($rust)/float($heap):.2f} wall, {float($rust_cpu)/float($heap_cpu):.2f} CPU')"
