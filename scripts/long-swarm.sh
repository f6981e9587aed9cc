#!/usr/bin/env bash
# The long swarm: random scenarios under the invariant checker until every
# policy has seen at least a million requests (with faults on in about half
# the runs). Prints failures (seed, scenario file, replay command), the
# requests per policy and the wall time. Usage: scripts/long-swarm.sh [RUNS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-1500}"
seed="${2:-1000}"
out="$(mktemp -d)"
cargo build --release -p elevator-cli
start=$(date +%s)
status=0
target/release/elevator swarm --seed "$seed" --runs "$runs" --out "$out" || status=$?
echo "wall time: $(( $(date +%s) - start )) s; failing scenarios (if any) in $out"
exit "$status"
