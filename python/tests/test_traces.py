"""replay, whatif and validate against the CLI's own output."""

import re

import pytest

import elevator
from elevator import ScenarioError
from conftest import REPO, run_cli, shared



@pytest.fixture(scope="module")
def trace():
    return shared("traces/mqsim/tpcc-small.trace")


def test_replay_runs_each_policy_and_takes_tunables(trace):
    results = elevator.replay(trace, "sata-hdd", sched=["noop", "deadline"],
                              set={"deadline.fifo_batch": 1})
    assert [r.scheduler for r in results] == ["noop", "deadline"]
    noop, deadline = results
    assert deadline.tunables["fifo_batch"] == 1 and noop.tunables == {}
    assert noop.format == "mqsim" and noop.records > 0
    assert noop.total.ios == deadline.total.ios > 0
    frame = results.to_pandas()
    assert list(frame["scheduler"]) == ["noop", "deadline"] and "lat_p99_ms" in frame


def test_whatif_ranks_and_agrees_with_replay(trace):
    ranked = elevator.whatif(trace, "sata-hdd", sched=["noop", "deadline", "bfq"],
                             grid={"deadline.fifo_batch": [1, 64]}, by="mean", threads=2)
    assert len(ranked) == 5 and [r.rank for r in ranked] == [1, 2, 3, 4, 5]
    values = [r.value for r in ranked]
    assert values == sorted(values)
    # The same variant replayed alone gives the same figures.
    best = ranked[0]
    again = elevator.replay(trace, "sata-hdd", sched=best.scheduler,
                            set={f"{best.scheduler}.{k}": v for k, v in best.tunables.items()})[0]
    assert again.total.to_dict() == best.total.to_dict()


def test_whatif_matches_the_cli_ranking(cli, trace):
    out = run_cli(cli, "whatif", str(trace), "--device", "sata-hdd", "--sched", "noop,deadline,bfq",
                  "--by", "mean", "--threads", "2")
    ranked = elevator.whatif(trace, "sata-hdd", sched="noop,deadline,bfq", by="mean", threads=2)
    # The CLI's table lists the variants best first.
    order = [line.split()[1] for line in out.splitlines() if re.match(r"^\s*\d+\s+\S", line)]
    assert order[: len(ranked)] == [r.label for r in ranked], out


def test_validate_equals_the_cli():
    trace = shared("traces/disksim-validation/ibm18es.trace")
    v = elevator.validate(trace, "ibm18es")
    assert v.requests > 1000 and v.demerit_ms > 0 and v.mean_model_ms > 0


def test_validate_prints_what_the_cli_prints(cli):
    trace = shared("traces/disksim-validation/ibm18es.trace")
    v = elevator.validate(trace, "ibm18es")
    out = run_cli(cli, "validate", str(trace), "--device", "ibm18es")
    assert f"{v.requests} requests" in out
    assert f"model {v.mean_model_ms:.3f} ms, measured {v.mean_measured_ms:.3f} ms" in out
    assert f"{v.demerit_ms:.3f} ms" in out


def test_bad_traces_and_arguments_raise(trace):
    with pytest.raises(ScenarioError):
        elevator.replay(REPO / "no-such-trace", "sata-hdd")
    with pytest.raises(ScenarioError, match="unknown"):
        elevator.replay(trace, "sata-hdd", format="tar")
    with pytest.raises(ScenarioError, match="unknown scheduler"):
        elevator.replay(trace, "sata-hdd", sched="nope")
    with pytest.raises(ScenarioError, match="unknown"):
        elevator.whatif(trace, "sata-hdd", by="speed")
    with pytest.raises(ScenarioError):
        elevator.replay(trace, "sata-hdd", time_scale=-1)
