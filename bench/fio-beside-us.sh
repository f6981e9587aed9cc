#!/usr/bin/env bash
# fio's JSON beside ours: five job files, each run once by fio and once by
# `elevator run --engine uring` (noop, the kernel's scheduler below us as it
# is), on the same file target; one table: per job and direction, IOPS and
# p99 completion latency of each and our share of fio's, and whether the
# two JSON documents have the same key set.
#
# The job files: fio/randread-qd32.fio, and from fio's examples
# (../shared/fio-examples) fio-seq-read, rand-zones,
# iometer-file-access-server, fixed-rate-submission and fio-seq-write. The examples are
# read from there and copied into a scratch directory with lines appended
# to their (single) job section to bound them (size, runtime): fio applies
# command-line options before its job file's own, so the bounds go in the
# file, the same for both programs.
#
# This VM's disk is shared and noisy: with THROTTLE=1 (the default, root
# only) both programs run in a blkio cgroup that throttles the disk under
# the target (cgroup v1 blkio.throttle or v2 io.max: 2000 IOPS and 100 MB/s
# each way), so that they meet the same device; THROTTLE=0 runs on the bare
# disk. Everything it changes (the cgroup, the scratch files) is undone on
# exit.
#
# Usage: bench/fio-beside-us.sh [DIR] [RUNTIME]   (DIR: where the target
#        file goes, default a scratch directory under target/; KEEP=DIR
#        keeps the job files and the JSON documents in DIR; ROUNDS=N runs
#        each job N times, fio and ours alternating, and the table shows
#        the medians with each side's range: one run is the default)
#        bench/fio-beside-us.sh keys             (regenerate the committed
#        fio 3.33 key lists in crates/elevator-cli/tests/data)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

for tool in fio python3; do
    if ! command -v "$tool" >/dev/null; then
        echo "fio-beside-us.sh: needs $tool (apt-get install -y fio python3)" >&2
        exit 2
    fi
done

KEYS_PY='
import json, sys
def walk(v, p, out):
    if isinstance(v, dict):
        for k, x in v.items():
            if p.endswith("/bins") or p.endswith("options"):
                out.add(p + "/*"); continue
            walk(x, p + "/" + k, out)
    elif isinstance(v, list):
        for x in v: walk(x, p + "[]", out)
    else:
        out.add(p)
out = set(); walk(json.load(open(sys.argv[1])), "", out)
print("\n".join(sorted(out)))
'

if [ "${1:-}" = keys ]; then
    D=$(mktemp -d)
    trap 'rm -rf "$D"' EXIT
    DATA=crates/elevator-cli/tests/data
    for fmt in json json+; do
        name=fio-3.33-json-keys.txt
        [ "$fmt" = json+ ] && name=fio-3.33-json-plus-keys.txt
        fio "$DATA/fio-keys.fio" --filename="$D/keys.bin" --output-format="$fmt" \
            --output="$D/out.json" >/dev/null
        {
            echo "# Every key path of fio $(fio --version | sed 's/fio-//')'s --output-format=$fmt for fio-keys.fio (fio-keys.fio --filename=FILE)."
            echo "# Maps keyed by numbers (bins) or options are written /*. Regenerate: bench/fio-beside-us.sh keys"
            python3 -c "$KEYS_PY" "$D/out.json"
        } >"$DATA/$name"
        echo "wrote $DATA/$name"
    done
    exit 0
fi

EXAMPLES=$ROOT/../shared/fio-examples
if [ ! -d "$EXAMPLES" ]; then
    echo "fio-beside-us.sh: $EXAMPLES is missing (the shared folder beside the repository)" >&2
    exit 2
fi
RUNTIME=${2:-10}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p elevator-cli
ELEVATOR=$CARGO_TARGET_DIR/release/elevator

WORK=$(mktemp -d "$CARGO_TARGET_DIR/fio-beside-us.XXXXXX")
DIR=${1:-$WORK}
TARGET=$DIR/fio-beside-us.bin
CG=
cleanup() {
    set +e
    if [ -n "$CG" ]; then
        rmdir "$CG" 2>/dev/null
    fi
    rm -f "$TARGET"
    rm -rf "$WORK"
}
trap cleanup EXIT

# The job files, bounded.
cp fio/randread-qd32.fio "$WORK/"
bounded() { # name, extra lines
    cp "$EXAMPLES/$1.fio" "$WORK/$1.fio"
    # filename= too: fio reads --filename before the file, so a job file's
    # own filename= (fio-seq-read's, fio-seq-write's) would win for fio.
    printf '\n; bounds added by bench/fio-beside-us.sh\n%b\nfilename=%s\n' "$2" "$TARGET" \
        >>"$WORK/$1.fio"
}
bounded fio-seq-read "size=1g\nruntime=$RUNTIME"
bounded rand-zones "size=256m\nruntime=$RUNTIME"
bounded iometer-file-access-server "size=256m\nruntime=$RUNTIME"
# fio 3.33 hangs on this file as it is: with io_submit_mode=offload its
# job's threads all wait on futexes and no I/O is issued (seen here, killed
# after 6 minutes of a 4-second job); inline submission, the same for both.
bounded fixed-rate-submission "size=16m\nio_submit_mode=inline"
bounded fio-seq-write "size=256m\nruntime=$RUNTIME"
JOBS="randread-qd32 fio-seq-read rand-zones iometer-file-access-server fixed-rate-submission"
JOBS="$JOBS fio-seq-write"

# Lay the target out once (1 GiB of data), outside any throttle.
"$ELEVATOR" run "$WORK/fio-seq-read.fio" --engine uring --filename "$TARGET" --allow-write \
    --runtime 1 --eta never >/dev/null

# The throttle: a blkio cgroup for the disk under the target.
run_in() { "$@"; }
if [ "${THROTTLE:-1}" = 1 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "fio-beside-us.sh: THROTTLE=1 needs root (THROTTLE=0 runs on the bare disk)" >&2
        exit 2
    fi
    MAJMIN=$(stat -c '%Hd:%Ld' "$TARGET")
    DISK=$(basename "$(readlink -f "/sys/dev/block/$MAJMIN")")
    if [ -e "/sys/dev/block/$MAJMIN/partition" ]; then
        DISK=$(basename "$(dirname "$(readlink -f "/sys/dev/block/$MAJMIN")")")
    fi
    DEVNO=$(cat "/sys/block/$DISK/dev")
    if [ -d /sys/fs/cgroup/blkio ]; then
        CG=/sys/fs/cgroup/blkio/elevator-fio-beside-us
        mkdir -p "$CG"
        for f in read_iops_device write_iops_device; do echo "$DEVNO 2000" >"$CG/blkio.throttle.$f"; done
        for f in read_bps_device write_bps_device; do echo "$DEVNO 100000000" >"$CG/blkio.throttle.$f"; done
    else
        CG=/sys/fs/cgroup/elevator-fio-beside-us
        mkdir -p "$CG"
        echo "$DEVNO riops=2000 wiops=2000 rbps=100000000 wbps=100000000" >"$CG/io.max"
    fi
    run_in() { sh -c 'echo $$ >"$0/cgroup.procs"; exec "$@"' "$CG" "$@"; }
    echo "throttle: $DISK ($DEVNO) at 2000 IOPS and 100 MB/s each way, cgroup $CG"
fi

echo "fio $(fio --version), elevator $($ELEVATOR --version | cut -d' ' -f2), kernel $(uname -r), target $TARGET"
ROUNDS=${ROUNDS:-1}
# fio lays out a job file's [global] filename= in the current directory
# even when the job's own filename= names the target: run in the scratch one.
cd "$WORK"
echo "rounds: $ROUNDS (fio and ours alternating); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
    for j in $JOBS; do
        run_in fio "$WORK/$j.fio" --filename="$TARGET" --output-format=json \
            --output="$WORK/$j.fio.$r.json" >/dev/null
        # --allow-write: iometer-file-access-server writes (fio writes an
        # existing file without asking; we do not).
        run_in "$ELEVATOR" run "$WORK/$j.fio" --engine uring --filename "$TARGET" \
            --allow-write --eta never --output-format json >"$WORK/$j.ours.$r.json"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

if [ -n "${KEEP:-}" ]; then # KEEP=DIR keeps the job files and both JSON documents
    mkdir -p "$KEEP"
    cp "$WORK"/*.fio "$WORK"/*.json "$KEEP/"
fi

python3 - "$WORK" "$ROUNDS" $JOBS <<'EOF'
import json, statistics, sys
work, rounds, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def keyset(d):
    out = set()
    def walk(v, p):
        if isinstance(v, dict):
            for k, x in v.items():
                if p.endswith('/bins') or p.endswith('options'):
                    out.add(p + '/*'); continue
                walk(x, p + '/' + k)
        elif isinstance(v, list):
            for x in v: walk(x, p + '[]')
        else:
            out.add(p)
    walk(d, '')
    return out
def p99(x):
    return x['clat_ns'].get('percentile', {}).get('99.000000', 0) / 1000
def med(xs):  # the median, and the range when there is more than one run
    m = statistics.median(xs)
    return f"{m:.0f}" if len(xs) == 1 else f"{m:.0f} ({min(xs):.0f}-{max(xs):.0f})"
def ratio(a, b):
    a, b = statistics.median(a), statistics.median(b)
    return b / a if a else None
print("| job file | job | dir | fio IOPS | ours IOPS | ours/fio | fio p99 µs | ours p99 µs "
      "| ours/fio | keys |")
print("|---|---|---|---|---|---|---|---|---|---|")
worst = 0.0
for j in jobs:
    fs = [json.load(open(f'{work}/{j}.fio.{r}.json')) for r in range(1, rounds + 1)]
    os_ = [json.load(open(f'{work}/{j}.ours.{r}.json')) for r in range(1, rounds + 1)]
    ka = set.union(*map(keyset, fs))
    kb = set.union(*map(keyset, os_))
    keys = 'same' if ka == kb else f'fio only {sorted(ka - kb)}, ours only {sorted(kb - ka)}'
    for k, fj in enumerate(fs[0]['jobs']):
        for d in ['read', 'write']:
            a = [f['jobs'][k][d] for f in fs]
            b = [o['jobs'][k][d] for o in os_]
            if a[0]['total_ios'] == 0 and b[0]['total_ios'] == 0:
                continue
            ia, ib = [x['iops'] for x in a], [x['iops'] for x in b]
            pa, pb = [p99(x) for x in a], [p99(x) for x in b]
            ri, rp = ratio(ia, ib), ratio(pa, pb)
            worst = max([worst] + [abs(r - 1) for r in (ri, rp) if r is not None])
            show = lambda r: "-" if r is None else f"{r:.3f}"
            print(f"| {j} | {fj['jobname']} | {d} | {med(ia)} | {med(ib)} | {show(ri)} "
                  f"| {med(pa)} | {med(pb)} | {show(rp)} | {keys} |")
print(f"\nlargest difference from fio (medians): {worst * 100:.1f} %")
EOF
