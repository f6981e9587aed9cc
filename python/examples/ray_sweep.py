"""A sweep on Ray: policies x tunables x devices x seeds, one DataFrame.

Starts (or joins, with --address) a Ray cluster, runs the sweep with each
evaluation a Ray task, and with --compare also on local threads and as a
serial loop, checking that the frames are equal and printing the times.

    python python/examples/ray_sweep.py --seeds 72 --compare   # 1,008 runs
    python python/examples/ray_sweep.py --seeds 2              # CI's size
"""

import argparse
import os
import time

import pandas as pd

import elevator
from elevator._sweep import _workload_args, evaluate

# A short mixed workload: a sequential reader, a random reader and a
# random writer on one disk (some 10-30 ms of CPU per run).
WORKLOAD = {
    "name": "ray-sweep",
    "description": "a sequential reader, a random reader and a random writer",
    "device": "ide-2003",
    "schedulers": ["deadline"],
    "result": {"name": "last reader's completion", "unit": "s", "metric": "completion",
               "job": "seq", "reduce": "max"},
    "job": [
        {"name": "seq", "rw": "read", "bs": "128k", "size": "128m"},
        {"name": "rand", "rw": "randread", "bs": "4k", "size": "12m"},
        {"name": "writer", "rw": "randwrite", "bs": "4k", "size": "12m"},
    ],
}


def grid(seeds: int):
    return {
        "sched": ["noop", "deadline", "cfq", "bfq"],
        "deadline.fifo_batch": [1, 4, 16],
        "bfq.slice_idle": [0, 8],
        "device": ["ide-2003", "sata-hdd"],
        "seed": list(range(1, seeds + 1)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=72, help="14 runs per seed")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of a local cluster")
    parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS"))
    parser.add_argument("--compare", action="store_true",
                        help="also run on local threads and serially, and time all three")
    args = parser.parse_args()

    import ray

    if args.address:
        ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    g = grid(args.seeds)
    points = elevator.expand_grid(g)
    print(f"{len(points)} runs on a cluster of {ray.cluster_resources().get('CPU', 0):.0f} CPUs")
    # Warm the workers (their start-up is not the sweep's cost).
    elevator.sweep(WORKLOAD, {"sched": ["noop"], "seed": [1, 2]}, backend="ray", progress=False)

    start = time.perf_counter()
    on_ray = elevator.sweep(WORKLOAD, g, backend="ray")
    t_ray = time.perf_counter() - start
    summary = (on_ray.groupby(["device", "scheduler"])["result"]
               .agg(["count", "mean", "min", "max"]).round(3))
    print(summary.to_string())
    print(f"failed: {on_ray.attrs['failed']}")
    print(f"ray: {t_ray:.1f} s; load average {os.getloadavg()}")
    if args.compare:
        start = time.perf_counter()
        local = elevator.sweep(WORKLOAD, g, backend="local", workers=args.cpus)
        t_local = time.perf_counter() - start
        pd.testing.assert_frame_equal(local, on_ray)
        work = _workload_args(WORKLOAD)
        start = time.perf_counter()
        serial = pd.DataFrame([row for p in points for row in evaluate(work, p)])
        t_serial = time.perf_counter() - start
        pd.testing.assert_frame_equal(serial, on_ray.drop(columns=[], errors="ignore"),
                                      check_dtype=False)
        print(f"local threads: {t_local:.1f} s; serial loop: {t_serial:.1f} s; "
              f"load average {os.getloadavg()}")
        print(f"speed-up over serial: ray {t_serial / t_ray:.2f}x, local {t_serial / t_local:.2f}x")
        print("frames equal: ray == local == serial")
    ray.shutdown()


if __name__ == "__main__":
    main()
