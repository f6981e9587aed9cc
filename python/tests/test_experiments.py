"""tune and the 2016 letter through Python."""

import elevator
from elevator import ScenarioError
from conftest import run_cli

import pytest

WORKLOAD = {
    "name": "tune-small",
    "description": "a reader against a random writer",
    "device": "ide-2003",
    "schedulers": ["deadline"],
    "result": {"name": "last reader's completion", "unit": "s", "metric": "completion",
               "job": "reader", "reduce": "max"},
    "job": [
        {"name": "reader", "rw": "read", "bs": "64k", "size": "2m"},
        {"name": "writer", "rw": "randwrite", "bs": "4k", "size": "1m"},
    ],
}


def test_tune_ranks_trials_and_is_deterministic():
    first = elevator.tune(WORKLOAD, "minimize p99(reader)", sched="deadline,noop", budget=12,
                          threads=2)
    again = elevator.tune(WORKLOAD, "minimize p99(reader)", sched=["deadline", "noop"],
                          budget=12, threads=1)
    assert first.to_dict() == again.to_dict()
    assert 0 < first.evaluations <= 12 and len(first.trials) == first.evaluations
    values = [t["values"][0] for t in first.trials if t["feasible"]]
    assert values == sorted(values)
    assert any(t["kernel_default"] for t in first.trials)
    frame = first.to_pandas()
    assert list(frame["rank"]) == list(range(1, len(frame) + 1)) and "p99(reader)" in frame


def test_tune_rejects_a_bad_objective():
    with pytest.raises(ScenarioError) as e:
        elevator.tune(WORKLOAD, "minimize happiness")
    assert e.value.key == "objective"


def test_the_letter_equals_the_cli_table(cli):
    table = elevator.letter(devices="ssd-sata-2016", sched="bfq").to_pandas()
    out = run_cli(cli, "letter", "--device", "ssd-sata-2016", "--sched", "bfq")
    starts = table[(table["row"] == "xterm") & (table["background"] != "idle")]
    assert len(starts) == 2
    for value in starts["value"]:
        assert value is not None and f"{value:.2f}" in out, out
    assert set(table["letter"].dropna()) >= {"0.21", "0.20"}
