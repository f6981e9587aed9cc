#!/bin/sh
# The runtime's per-request cost at QD1 beside fio's, on one target in one
# run: fio (io_uring, direct) and `elevator run --engine uring --sched noop`
# alternate on the same job file, ROUNDS times; each line gives IOPS and the
# latency percentiles both tools report (fio: clat, from after the submit
# call returned, and lat, from before it; ours: from the workload's submit,
# before the policy). Usage: bench/qd1-vs-fio.sh TARGET [ROUNDS] [SECONDS]
set -eu
target=${1:?usage: qd1-vs-fio.sh TARGET [ROUNDS] [SECONDS]}
rounds=${2:-3}
secs=${3:-2}
elevator=${ELEVATOR:-target/release/elevator}
job=$(mktemp /tmp/qd1-vs-fio.XXXXXX.fio)
ours=$(mktemp /tmp/qd1-vs-fio.XXXXXX.fio)
trap 'rm -f "$job" "$ours"' EXIT
cat >"$job" <<JOB
[global]
ioengine=io_uring
direct=1
filename=$target
time_based=1
runtime=$secs
lat_percentiles=1
[qd1]
rw=randread
bs=4k
iodepth=1
JOB
# Our job-file reader takes no reporting options.
grep -v '^lat_percentiles' "$job" >"$ours"
summary='import json,sys
d=json.load(sys.stdin)["jobs"][0]["read"]
p=lambda k,q:d.get(k,{}).get("percentile",{}).get(q,0)/1000
print("%-8s IOPS %7.0f  clat p50 %6.1f p99 %7.1f  lat p50 %6.1f p99 %7.1f us" % (sys.argv[1],
  d["iops"], p("clat_ns","50.000000"), p("clat_ns","99.000000"),
  p("lat_ns","50.000000") or p("clat_ns","50.000000"),
  p("lat_ns","99.000000") or p("clat_ns","99.000000")))'
i=0
while [ "$i" -lt "$rounds" ]; do
    echo "round $((i + 1)): $(uptime | sed 's/.*load average/load average/')"
    fio --output-format=json "$job" | python3 -c "$summary" fio
    "$elevator" run "$ours" --engine uring --sched noop --format json 2>/dev/null |
        python3 -c "$summary" elevator
    i=$((i + 1))
done
