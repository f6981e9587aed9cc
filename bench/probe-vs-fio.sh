#!/usr/bin/env bash
# The probed model beside fio: `elevator device probe` fits a profile to a
# target, then four jobs run three times under fio 3.33 (io_uring, direct)
# and once under `elevator run JOB.fio --engine sim --device probed.toml`;
# one table of the medians and the model's ratio to fio for 4 KiB randread
# IOPS at QD1 and QD32 with their p50 and p99, and 128 KiB sequential read
# and write MB/s (issue 27's must-show, within 15 %).
#
# Latency is fio's `lat` (from before the submit call to the completion,
# `lat_percentiles=1`), which is what the probe measures and the simulator
# reports; fio's `clat` (from after the submit call returned) is shown
# beside it. `uptime` is printed before the probe and each fio run: on a
# shared machine the load moves every real figure.
#
# Usage: bench/probe-vs-fio.sh [TARGET] [RUNS] [RUNTIME]
#   TARGET: a block device or file the probe and fio may WRITE (default:
#   a fresh 1 GiB loop device with direct I/O over /dev/shm, root only,
#   detached on exit); RUNS fio runs per job (default 3); RUNTIME seconds
#   each (default 3). KEEP=DIR keeps the profile, job files and JSON.
#   ELEVATOR=path uses that binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in fio python3; do
    if ! command -v "$tool" >/dev/null; then
        echo "probe-vs-fio.sh: needs $tool (apt-get install -y fio python3)" >&2
        exit 2
    fi
done
RUNS=${2:-3}
RUNTIME=${3:-3}
if [ -z "${ELEVATOR:-}" ]; then
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
    cargo build --release -q -p elevator-cli
    ELEVATOR=$CARGO_TARGET_DIR/release/elevator
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/probe-vs-fio.XXXXXX")
LOOP=
IMG=
cleanup() {
    set +e
    if [ -n "$LOOP" ]; then losetup -d "$LOOP"; fi
    if [ -n "$IMG" ]; then rm -f "$IMG"; fi
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$WORK"/* "$KEEP/"; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

TARGET=${1:-}
if [ -z "$TARGET" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "probe-vs-fio.sh: making a loop device needs root (or name a TARGET)" >&2
        exit 2
    fi
    IMG=$(mktemp /dev/shm/probe-vs-fio.XXXXXX.img)
    truncate -s 1G "$IMG"
    LOOP=$(losetup --direct-io=on -f --show "$IMG")
    TARGET=$LOOP
fi

echo "fio $(fio --version), elevator $($ELEVATOR --version | cut -d' ' -f2), kernel $(uname -r)"
echo "target $TARGET${IMG:+ (loop over $IMG, direct-io)}"
# Lay every block out once, so that neither tool reads holes.
fio --name=fill --filename="$TARGET" --rw=write --bs=1m --direct=1 --ioengine=io_uring \
    --size=1g --output=/dev/null
echo "probe: $(uptime)"
"$ELEVATOR" device probe "$TARGET" --allow-write -o "$WORK/probed.toml"

job() { # name rw bs iodepth
    cat >"$WORK/$1.fio" <<EOF
[global]
ioengine=io_uring
direct=1
time_based=1
runtime=$RUNTIME
size=1g
lat_percentiles=1
[$1]
rw=$2
bs=$3
iodepth=$4
EOF
}
job randread-qd1 randread 4k 1
job randread-qd32 randread 4k 32
job seqread-128k read 128k 1
job seqwrite-128k write 128k 1
JOBS="randread-qd1 randread-qd32 seqread-128k seqwrite-128k"

for j in $JOBS; do
    for r in $(seq 1 "$RUNS"); do
        echo "fio $j run $r: $(uptime)"
        fio "$WORK/$j.fio" --filename="$TARGET" --output-format=json \
            --output="$WORK/$j.fio.$r.json" >/dev/null
    done
    "$ELEVATOR" run "$WORK/$j.fio" --engine sim --device "$WORK/probed.toml" \
        --filename "$TARGET" --output-format json >"$WORK/$j.model.json"
done

python3 - "$WORK" "$RUNS" $JOBS <<'EOF'
import json, statistics, sys
work, runs, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def figures(path):
    d = json.load(open(path))['jobs'][0]
    x = d['read'] if d['read']['total_ios'] else d['write']
    pct = lambda k, q: x[k].get('percentile', {}).get(q, 0) / 1e3
    return {'iops': x['iops'], 'mb_s': x['bw_bytes'] / 1e6,
            'p50': pct('lat_ns', '50.000000'), 'p99': pct('lat_ns', '99.000000'),
            'clat50': pct('clat_ns', '50.000000'), 'clat99': pct('clat_ns', '99.000000')}
rows = []
for j in jobs:
    f = [figures(f'{work}/{j}.fio.{r}.json') for r in range(1, runs + 1)]
    fio = {k: statistics.median(v[k] for v in f) for k in f[0]}
    model = figures(f'{work}/{j}.model.json')
    wanted = ['mb_s'] if j.startswith('seq') else ['iops', 'p50', 'p99']
    for k in wanted:
        rows.append((j, k, fio[k], model[k], fio.get('clat' + k[1:], None) if k[0] == 'p' else None))
print(f"{'job':<15} {'figure':<7} {'fio (median)':>13} {'model':>11} {'model/fio':>10} "
      f"{'fio clat':>9}")
worst = 0.0
for j, k, a, b, c in rows:
    r = b / a if a else 0.0
    worst = max(worst, abs(r - 1))
    unit = {'iops': 'IOPS', 'mb_s': 'MB/s'}.get(k, 'us')
    name = {'iops': 'IOPS', 'mb_s': 'MB/s', 'p50': 'p50 us', 'p99': 'p99 us'}[k]
    clat = f"{c:9.1f}" if c is not None else f"{'':>9}"
    print(f"{j:<15} {name:<7} {a:13.1f} {b:11.1f} {r:10.3f} {clat}")
print(f"largest difference from fio: {worst * 100:.1f} % "
      f"(fio: median of {runs} runs; latency is fio's lat, clat beside it)")
EOF
echo "done: $(uptime)"
