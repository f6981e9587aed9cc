"""Sweeps: the grid's points, local threads and Ray tasks giving the same
frame, and failed evaluations reported with their settings."""

import os

import pandas as pd
import pytest

import elevator
from elevator import ScenarioError

WORKLOAD = {
    "name": "sweep-small",
    "description": "a reader and a writer on an IDE disk",
    "device": "ide-2003",
    "schedulers": ["deadline", "noop"],
    "result": {"name": "last reader's completion", "unit": "s", "metric": "completion",
               "job": "reader", "reduce": "max"},
    "job": [
        {"name": "reader", "rw": "read", "bs": "64k", "size": "2m"},
        {"name": "writer", "rw": "randwrite", "bs": "4k", "size": "512k"},
    ],
}

GRID = {
    "sched": ["deadline", "noop", "bfq"],
    "deadline.fifo_batch": [-1, 1, 16],
    "seed": [1, 2],
}


def test_the_grid_multiplies_only_each_policys_own_tunables():
    points = elevator.expand_grid(GRID)
    assert len(points) == 3 * 2 + 2 + 2
    assert points[0] == {"sched": "deadline", "device": None, "seed": 1, "set": {"deadline.fifo_batch": -1}}
    assert all(p["set"] == {} for p in points if p["sched"] != "deadline")
    blocks = elevator.expand_grid({"sched": ["noop", "bfq"], "block.nr_requests": [8, 128]})
    assert len(blocks) == 4 and all("block.nr_requests" in p["set"] for p in blocks)


def test_a_bad_grid_raises_before_running():
    with pytest.raises(ScenarioError, match="fifo_batches"):
        elevator.expand_grid({"sched": ["deadline"], "deadline.fifo_batches": [1]})
    with pytest.raises(ScenarioError, match="unknown scheduler"):
        elevator.expand_grid({"sched": ["nope"]})
    with pytest.raises(ScenarioError, match="unknown grid keys"):
        elevator.expand_grid({"sched": ["noop"], "speed": [1]})
    with pytest.raises(ScenarioError):
        elevator.sweep(WORKLOAD, GRID, backend="carrier-pigeon")


def check(frame: pd.DataFrame):
    assert len(frame) == 10
    failed = frame[frame["error"].notna()]
    # The two points with fifo_batch=-1 failed, and say so with their settings.
    assert len(failed) == 2 and frame.attrs["failed"] == 2
    assert set(failed["deadline.fifo_batch"]) == {-1} and set(failed["seed"]) == {1, 2}
    assert failed["error"].str.contains("fifo_batch").all()
    ok = frame[frame["error"].isna()]
    assert ok["result"].notna().all() and (ok["aggregate_mb_s"] > 0).all()
    # Each point is the run elevator.run gives for it.
    one = elevator.run(WORKLOAD, sched="deadline", seed=2, set={"deadline.fifo_batch": 1})
    row = ok[(ok["sched"] == "deadline") & (ok["seed"] == 2) & (ok["deadline.fifo_batch"] == 1)]
    assert row["result"].item() == one.runs[0].result.value
    assert row["aggregate_mb_s"].item() == one.runs[0].aggregate_mb_s


def test_local_sweep_reports_failures_with_their_settings():
    check(elevator.sweep(WORKLOAD, GRID, workers=2, progress=False))


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    if not ray.is_initialized():
        # .ci/run starts a local cluster and sets RAY_ADDRESS; otherwise start one here.
        address = os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_sweep_equals_local_sweep(ray_cluster):
    local = elevator.sweep(WORKLOAD, GRID, workers=2, progress=False)
    on_ray = elevator.sweep(WORKLOAD, GRID, backend="ray", progress=False)
    check(on_ray)
    pd.testing.assert_frame_equal(local, on_ray)


def test_a_scenario_file_is_shipped_to_the_workers_as_text(tmp_path, ray_cluster):
    import tomllib

    path = tmp_path / "w.toml"
    import json

    # The dict as TOML, through the package's own conversion.
    from elevator import _native

    path.write_text(_native.toml_from_json(json.dumps(WORKLOAD)))
    frame = elevator.sweep(path, {"sched": ["noop"], "seed": [1, 2]}, backend="ray", progress=False)
    assert frame["error"].isna().all() and len(frame) == 2
    assert tomllib.loads(path.read_text())["name"] == "sweep-small"
