"""Results through Python equal the CLI's JSON, for every built-in scenario.

At reduced cost, by a way the CLI gives: each scenario under one of its own
policies (`--sched`), taken in turn down its list so that the policies vary
across scenarios; one scenario under all its policies. The CLI runs in a
subprocess while Python runs (the GIL released), so both cores work.
"""

import json
import subprocess

import pytest

import elevator
from elevator import _native

BUILTINS = [s["name"] for s in _native.scenarios()]


def test_the_builtins_are_the_scenario_files():
    from conftest import REPO

    files = sorted(p.stem for p in (REPO / "scenarios").glob("*.toml"))
    assert sorted(BUILTINS) == files


def both(cli, name, sched=None):
    args = [str(cli), "run", name, "--format", "json"]
    if sched:
        args += ["--sched", ",".join(sched)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ours = elevator.run(name, sched=sched)
    out, err = proc.communicate()
    assert proc.returncode == 0, f"{' '.join(args)}: {err}"
    return json.loads(out), ours


@pytest.mark.parametrize("index,name", list(enumerate(BUILTINS)))
def test_python_equals_cli_json(cli, index, name):
    policies = _native.describe(name)["schedulers"]
    sched = [policies[index % len(policies)]]
    theirs, ours = both(cli, name, sched)
    assert ours.to_dict() == theirs
    # The typed objects read what the JSON says.
    assert [r.scheduler for r in ours.runs] == [r["scheduler"] for r in theirs["runs"]]
    assert ours.runs[0].result.value == theirs["runs"][0]["result"]["value"]


def test_every_policy_of_one_scenario_equals_cli_json(cli):
    theirs, ours = both(cli, "ten-streaming-readers")
    assert len(theirs["runs"]) > 1
    assert ours.to_dict() == theirs
