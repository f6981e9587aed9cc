"""The API: listings, scenarios from names, files, text and dicts, typed
results, errors with file, line and key, and the GIL released."""

import threading
import time
from pathlib import Path

import pytest

import elevator
from elevator import ScenarioError

SMALL = """
name = "small"
description = "two readers on an IDE disk"
device = "ide-2003"
schedulers = ["deadline", "noop"]

[result]
name = "seconds until the last reader finishes"
unit = "s"
metric = "completion"
job = "reader"
reduce = "max"

[[job]]
name = "reader"
count = 2
rw = "read"
bs = "64k"
size = "4m"
"""


def test_listings_name_the_registry():
    names = [p.name for p in elevator.policies()]
    assert "bfq" in names and "deadline" in names and "mq-deadline" in names
    assert {d.name for d in elevator.devices()} >= {"ide-2003", "sata-hdd", "nvme"}
    scenarios = {s.name: s.description for s in elevator.scenarios()}
    assert "ten-streaming-readers" in scenarios and scenarios["ten-streaming-readers"]
    fifo = {t.name: t.default for t in elevator.tunables("deadline")}
    assert fifo["fifo_batch"] == 16 and fifo["read_expire"] == 500


def test_a_scenario_from_text_a_file_and_a_dict_give_one_report(tmp_path: Path):
    from_text = elevator.run(SMALL)
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    from_file = elevator.run(path)
    from_str_path = elevator.run(str(path))
    import tomllib  # Python 3.11+

    from_dict = elevator.run(tomllib.loads(SMALL))
    assert from_text.to_dict() == from_file.to_dict() == from_str_path.to_dict()
    assert from_dict.to_dict() == from_text.to_dict()
    assert [r.scheduler for r in from_text.runs] == ["deadline", "noop"]
    run = from_text.run("deadline")
    assert isinstance(run, elevator.Run) and isinstance(run.jobs[0], elevator.Job)
    assert run.jobs[0].bytes == 4 * 1024 * 1024 and run.jobs[0].read_bytes == run.jobs[0].bytes
    assert run.device.requests > 0 and 0 < run.device.utilization <= 1


def test_options_override_the_scenario():
    base = elevator.run(SMALL, sched="deadline")
    tuned = elevator.run(SMALL, sched=["deadline"], set={"deadline.fifo_batch": 1})
    assert base.runs[0].tunables["fifo_batch"] == 16
    assert tuned.runs[0].tunables["fifo_batch"] == 1
    other = elevator.run(SMALL, sched="noop", device="nvme", seed=7)
    assert (other.device, other.seed) == ("nvme", 7)
    assert other.runs[0].simulated_s < base.runs[0].simulated_s


def test_to_pandas_per_policy_job_and_group():
    report = elevator.run(SMALL)
    per_policy = report.to_pandas()
    assert list(per_policy["scheduler"]) == ["deadline", "noop"]
    assert per_policy["result"].notna().all()
    per_job = report.to_pandas(per="job")
    assert len(per_job) == 4 and set(per_job["job"]) == {"reader.0", "reader.1"}
    grouped = elevator.run("group-weights-1-vs-4", sched="bfq").to_pandas(per="group")
    assert len(grouped) >= 2 and grouped["disk_share"].sum() == pytest.approx(1.0, abs=0.01)
    with pytest.raises(ValueError):
        report.to_pandas(per="disk")


def test_a_bad_line_in_a_file_names_the_file_line_and_key(tmp_path: Path):
    path = tmp_path / "bad.toml"
    path.write_text(SMALL.replace('bs = "64k"', 'bs = "sixty-four"'))
    with pytest.raises(ScenarioError) as e:
        elevator.run(path)
    err = e.value
    assert err.file == str(path)
    assert err.line == SMALL.splitlines().index('bs = "64k"') + 1
    assert err.key is not None and "bs" in err.key
    assert str(path) in str(err) and f":{err.line}" in str(err)
    assert isinstance(err, ValueError)


def test_unknown_policy_device_tunable_and_scenario_raise():
    with pytest.raises(ScenarioError, match="unknown scheduler") as e:
        elevator.run(SMALL, sched="elevator-of-doom")
    assert e.value.key == "sched"
    with pytest.raises(ScenarioError, match="no-such-disk") as e:
        elevator.run(SMALL, device="no-such-disk")
    assert e.value.key == "device"
    with pytest.raises(ScenarioError, match="fifo_batches") as e:
        elevator.run(SMALL, set={"deadline.fifo_batches": 3})
    assert e.value.key == "set.deadline.fifo_batches"
    with pytest.raises(ScenarioError, match="negative|>= 0|must not"):
        elevator.run(SMALL, set=["deadline.fifo_batch=-1"])
    with pytest.raises(ScenarioError, match="POLICY.TUNABLE=VALUE"):
        elevator.run(SMALL, set=["fifo_batch"])
    with pytest.raises(ScenarioError, match="no scenario"):
        elevator.run("no-such-scenario")
    with pytest.raises(ScenarioError) as e:
        elevator.tunables("nope")
    assert e.value.key == "policy"
    with pytest.raises(ScenarioError):
        elevator.run(SMALL, seed=-1)
    with pytest.raises(ScenarioError):
        elevator.run(12)  # type: ignore[arg-type]
    with pytest.raises(ScenarioError) as e:
        elevator.run({"name": "x", "device": "ide-2003", "job": [{"name": "a", "rw": "read", "bs": []}]})
    assert e.value.file == "<dict>"


def test_errors_survive_pickling():
    import pickle

    err = ScenarioError("bad", "f.toml", 3, "job.bs")
    back = pickle.loads(pickle.dumps(err))
    assert (back.file, back.line, back.key, back.message) == ("f.toml", 3, "job.bs", "bad")


def test_the_gil_is_released_while_simulating():
    # The main thread counts while another thread is inside the simulator;
    # with the GIL held for the whole run it could not count at all.
    ticks = [0]
    seen = {}

    def simulate():
        seen["before"] = ticks[0]
        # Every policy: a second or more of simulation, even on an idle machine.
        seen["report"] = elevator.run("ten-streaming-readers")
        seen["after"] = ticks[0]

    t = threading.Thread(target=simulate)
    t.start()
    while t.is_alive():
        ticks[0] += 1
        time.sleep(0.001)
    t.join()
    assert len(seen["report"].runs) == 7
    assert seen["after"] - seen["before"] > 5, seen


def test_every_public_name_has_a_docstring_and_a_stub():
    stub = (Path(elevator.__file__).parent / "__init__.pyi").read_text()
    for name in elevator.__all__:
        obj = getattr(elevator, name)
        assert obj.__doc__ and obj.__doc__.strip(), name
        assert f"def {name}(" in stub or f"{name} as {name}" in stub, name
