#!/usr/bin/env bash
# The minimum supported Rust version (the workspace's `rust-version`), as far as this machine can
# check it. Only one toolchain is installed here and none can be fetched, so the build itself
# cannot run on the declared version. What is checked instead:
#  - clippy's `incompatible_msrv` lint, which reads `rust-version` and flags standard-library
#    items stabilised after it, runs in `.ci/run`'s clippy step with -D warnings;
#  - here: no dependency in Cargo.lock declares a `rust-version` above the workspace's, so a
#    user on the declared version can build the locked tree;
#  - here: every crate inherits the one declared version (`rust-version.workspace = true`).
# Language features newer than the declared version are not caught by either; only a build on
# that toolchain would catch them. A few seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo metadata --format-version 1 --locked | python3 -c '
import json, sys
meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
def v(s):
    return tuple(int(x) for x in s.split(".")[:3]) + (0,) * (3 - len(s.split(".")[:3]))
declared = {p["rust_version"] for p in meta["packages"] if p["id"] in members}
if len(declared) != 1 or None in declared:
    sys.exit(f"msrv: the workspace crates declare {sorted(map(str, declared))}: one rust-version for all")
msrv = declared.pop()
bad = [(p["name"], p["version"], p["rust_version"]) for p in meta["packages"]
       if p["id"] not in members and p.get("rust_version") and v(p["rust_version"]) > v(msrv)]
for name, version, rv in sorted(bad):
    print(f"msrv: {name} {version} needs Rust {rv}, above the workspace'"'"'s {msrv}")
if bad:
    sys.exit(1)
n = sum(1 for p in meta["packages"] if p["id"] not in members)
print(f"msrv: {msrv}; none of the {n} packages in Cargo.lock declares a higher rust-version")
'
