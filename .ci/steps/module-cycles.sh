#!/usr/bin/env bash
# No new loop between sibling modules of a crate (see module-cycles.py). Under a second.
set -euo pipefail
exec python3 "$(dirname "$0")/module-cycles.py" "$(dirname "$0")/../.."
