#!/usr/bin/env bash
# The kernel's schedulers beside ours, on the same block device.
#
# Root only; not run in CI. Makes a loop device with direct I/O over a file
# on tmpfs (the one block device these VMs can make: no null_blk, no
# device-mapper), then runs the job files in fio/:
#   1. randread-timed.fio (4 KiB random reads, QD32) under fio with each
#      kernel scheduler (none, mq-deadline, kyber, bfq), and under our
#      policies on the io_uring runtime (kernel scheduler `none` below us);
#   2. weights-100-300.fio: kernel bfq (two fio processes in blkio/io cgroups
#      weighted 100 and 300) beside our bfq (weights from the job file);
#   3. rt-vs-idle.fio: kernel mq-deadline and bfq beside our cfq, bfq and
#      deadline-mc;
#   4. randread-vs-buffered-write.fio: a QD1 random reader against a buffered
#      writer under each kernel scheduler (kernel only: our runtime does direct
#      I/O), with vm.dirty_bytes at 64 MiB and dirty_background_bytes at 16 MiB
#      so that writeback runs during the job, and the writeback throttling
#      target (wbt_lat_usec) the kernel keeps under each scheduler.
# and prints one table: IOPS, bandwidth, p50/p99/max completion latency, and
# for the weighted and prioritized jobs the share each job got. Everything
# it changes (scheduler, cgroups, dirty limits, loop device, tmpfs mount) is restored on
# exit. Usage: sudo bench/kernel-beside-us.sh [RUNTIME] [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."

RUNTIME=${1:-10s}
SIZE=${2:-1g}
export RUNTIME SIZE

if [ "$(id -u)" -ne 0 ]; then
    echo "kernel-beside-us.sh: needs root (loop devices, sysfs, cgroups)" >&2
    exit 2
fi
for tool in fio jq losetup; do
    if ! command -v "$tool" >/dev/null; then
        apt-get update -qq && apt-get install -y -qq fio jq util-linux >/dev/null
        break
    fi
done

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p elevator-cli
ELEVATOR=$CARGO_TARGET_DIR/release/elevator

WORK=$(mktemp -d /tmp/elevator-bench.XXXXXX)
MNT=$WORK/tmpfs
RESULTS=$WORK/results
mkdir -p "$MNT" "$RESULTS"
LOOP=
ORIG_SCHED=
CGROUPS=()
DIRTY=$(cat /proc/sys/vm/dirty_bytes /proc/sys/vm/dirty_background_bytes \
    /proc/sys/vm/dirty_ratio /proc/sys/vm/dirty_background_ratio | tr '\n' ' ')

cleanup() {
    set +e
    if [ -n "$LOOP" ] && [ -n "$ORIG_SCHED" ]; then
        echo "$ORIG_SCHED" >"/sys/block/${LOOP#/dev/}/queue/scheduler"
    fi
    for cg in "${CGROUPS[@]}"; do rmdir "$cg" 2>/dev/null; done
    restore_dirty
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    mountpoint -q "$MNT" && umount "$MNT"
    rm -rf "$WORK"
}
# Writing a ratio clears the bytes setting and the other way round, so restore whichever was set.
restore_dirty() {
    local bytes bg_bytes ratio bg_ratio
    read -r bytes bg_bytes ratio bg_ratio <<<"$DIRTY"
    if [ "$bytes" -gt 0 ]; then echo "$bytes" >/proc/sys/vm/dirty_bytes
    else echo "$ratio" >/proc/sys/vm/dirty_ratio; fi
    if [ "$bg_bytes" -gt 0 ]; then echo "$bg_bytes" >/proc/sys/vm/dirty_background_bytes
    else echo "$bg_ratio" >/proc/sys/vm/dirty_background_ratio; fi
}
trap cleanup EXIT

mount -t tmpfs -o size=$(( $(numfmt --from=iec "${SIZE^^}") + (64 << 20) )) tmpfs "$MNT"
truncate -s "$SIZE" "$MNT/backing"
# Fill it, so reads hit pages rather than holes.
dd if=/dev/zero of="$MNT/backing" bs=1M count=$(( $(numfmt --from=iec "${SIZE^^}") >> 20 )) \
    conv=notrunc status=none
LOOP=$(losetup --direct-io=on --show -f "$MNT/backing")
DEV=${LOOP#/dev/}
SCHED_FILE=/sys/block/$DEV/queue/scheduler
ORIG_SCHED=$(sed 's/.*\[\(.*\)\].*/\1/' "$SCHED_FILE")
echo "device $LOOP over tmpfs ($SIZE, direct-io $(cat /sys/block/$DEV/loop/dio)), runtime $RUNTIME," \
    "kernel $(uname -r), $(fio --version), $(nproc) CPUs" >&2

set_kernel_sched() { echo "$1" >"$SCHED_FILE"; }

# A cgroup (v1 blkio or v2 io) with a BFQ weight, in $CG (no subshell, so that cleanup sees it).
make_cgroup() {
    local name=$1 weight=$2 dir
    if [ -d /sys/fs/cgroup/blkio ]; then
        dir=/sys/fs/cgroup/blkio/$name
        mkdir -p "$dir"
        echo "$weight" >"$dir/blkio.bfq.weight"
    else
        dir=/sys/fs/cgroup/$name
        echo +io >/sys/fs/cgroup/cgroup.subtree_control
        mkdir -p "$dir"
        echo "$weight" >"$dir/io.bfq.weight"
    fi
    CGROUPS+=("$dir")
    CG=$dir
}

# Summary from fio-format JSON: IOPS and MiB/s summed over the jobs' reads, then p50, p99 and
# max completion latency (us) of the first job (the RT job; the weight-100 job).
summarize() {
    jq -r '[.jobs[].read] as $r |
        [($r | map(.iops) | add), ($r | map(.bw) | add) / 1024,
         $r[0].clat_ns.percentile["50.000000"] / 1000,
         $r[0].clat_ns.percentile["99.000000"] / 1000,
         $r[0].clat_ns.max / 1000] | @tsv' "$1"
}
# I/Os per job, in job order.
ios() { jq -r '[.jobs[].read.total_ios] | map(tostring) | join(" ")' "$1"; }

ROWS=$RESULTS/rows
row() { printf '%s\n' "$*" >>"$ROWS"; }

# 1. Throughput: 4 KiB random reads at QD32.
for s in none mq-deadline kyber bfq; do
    set_kernel_sched "$s"
    fio --filename="$LOOP" --output-format=json fio/randread-timed.fio >"$RESULTS/k-$s.json"
    row "randread-qd32 kernel:$s $(summarize "$RESULTS/k-$s.json") -"
done
set_kernel_sched none
for s in noop deadline cfq deadline-mc bfq; do
    "$ELEVATOR" run fio/randread-timed.fio --engine uring --target "$LOOP" --sched "$s" \
        --output-format=json >"$RESULTS/o-$s.json"
    row "randread-qd32 ours:$s $(summarize "$RESULTS/o-$s.json") -"
done

# 2. Weights 100:300.
sed '/^cgroup/d' fio/weights-100-300.fio >"$WORK/weights-nocg.fio"
set_kernel_sched bfq
for w in 100 300; do
    make_cgroup "elevator-w$w" "$w"
    sh -c "echo \$\$ >$CG/cgroup.procs; exec fio --filename=$LOOP --section=w$w \
        --output-format=json $WORK/weights-nocg.fio" >"$RESULTS/k-w$w.json" &
done
wait
jq -s '{jobs: [.[0].jobs[0], .[1].jobs[0]]}' "$RESULTS/k-w100.json" "$RESULTS/k-w300.json" \
    >"$RESULTS/k-weights.json"
read -r a b < <(ios "$RESULTS/k-weights.json")
row "weights-100:300 kernel:bfq $(summarize "$RESULTS/k-weights.json") $(jq -n "$b/$a*100|round/100")"
set_kernel_sched none
"$ELEVATOR" run fio/weights-100-300.fio --engine uring --target "$LOOP" --sched bfq \
    --output-format=json >"$RESULTS/o-weights.json"
read -r a b < <(ios "$RESULTS/o-weights.json")
row "weights-100:300 ours:bfq $(summarize "$RESULTS/o-weights.json") $(jq -n "$b/$a*100|round/100")"

# 3. ionice RT against IDLE.
for s in mq-deadline bfq; do
    set_kernel_sched "$s"
    fio --filename="$LOOP" --output-format=json fio/rt-vs-idle.fio >"$RESULTS/k-prio-$s.json"
    read -r a b < <(ios "$RESULTS/k-prio-$s.json")
    row "rt-vs-idle kernel:$s $(summarize "$RESULTS/k-prio-$s.json") $(jq -n "$a/($b+0.001)*100|round/100")"
done
set_kernel_sched none
for s in cfq bfq deadline-mc; do
    "$ELEVATOR" run fio/rt-vs-idle.fio --engine uring --target "$LOOP" --sched "$s" \
        --output-format=json >"$RESULTS/o-prio-$s.json"
    read -r a b < <(ios "$RESULTS/o-prio-$s.json")
    row "rt-vs-idle ours:$s $(summarize "$RESULTS/o-prio-$s.json") $(jq -n "$a/($b+0.001)*100|round/100")"
done

# 4. A QD1 random reader against buffered writeback; the share column is the kernel's
# writeback-throttling target under that scheduler (0: off).
echo $((64 << 20)) >/proc/sys/vm/dirty_bytes
echo $((16 << 20)) >/proc/sys/vm/dirty_background_bytes
for s in none mq-deadline kyber bfq; do
    set_kernel_sched "$s"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    fio --filename="$LOOP" --output-format=json fio/randread-vs-buffered-write.fio \
        >"$RESULTS/k-rw-$s.json"
    row "read-vs-wback kernel:$s $(summarize "$RESULTS/k-rw-$s.json")" \
        "wbt=$(cat "/sys/block/$DEV/queue/wbt_lat_usec" 2>/dev/null || echo -)"
done
restore_dirty
set_kernel_sched none

# The table. Latencies are the first job's; share: weights, I/Os of w300 / w100; rt-vs-idle,
# I/Os of RT / IDLE; read-vs-writeback, the writeback throttling target in us.
printf '%-16s %-18s %10s %8s %9s %9s %10s %8s\n' \
    job scheduler IOPS MiB/s "p50 us" "p99 us" "max us" share
while read -r job sched iops mib p50 p99 max share; do
    printf '%-16s %-18s %10.0f %8.1f %9.1f %9.1f %10.1f %8s\n' \
        "$job" "$sched" "$iops" "$mib" "$p50" "$p99" "$max" "$share"
done <"$ROWS"
base=$(jq '.jobs[0].read.iops' "$RESULTS/k-none.json")
for s in noop bfq; do
    ours=$(jq '.jobs[0].read.iops' "$RESULTS/o-$s.json")
    echo "ours:$s / fio io_uring with kernel none: $(jq -n "$ours/$base*1000|round/10") %"
done
