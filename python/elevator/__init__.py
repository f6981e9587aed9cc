"""elevator: Linux disk I/O schedulers in a deterministic simulator, from Python.

The API follows the CLI (``elevator run``, ``replay``, ``whatif``,
``validate``, ``list``) and calls the same Rust library; results are typed
objects with ``to_dict()`` (the CLI's JSON, ``docs/report-schema.md``) and
``to_pandas()``. The simulator runs with the GIL released, so threads run in
parallel; :func:`sweep` uses that, or Ray tasks with ``backend="ray"``.

>>> import elevator
>>> report = elevator.run("ten-streaming-readers", sched=["deadline", "cfq"])
>>> report.to_pandas()[["scheduler", "result"]]          # doctest: +SKIP

Bad input raises :class:`ScenarioError` with the file, line and key.
"""

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import ScenarioError
from ._results import (
    DeviceStats,
    Device,
    Group,
    Job,
    Policy,
    Replay,
    ReplayResults,
    Report,
    ResultValue,
    Run,
    ScenarioInfo,
    Tunable,
    Validation,
    LetterTable,
    TuneResult,
)
from ._sweep import sweep, expand_grid

__all__ = [
    "ScenarioError",
    "run",
    "replay",
    "whatif",
    "validate",
    "letter",
    "tune",
    "sweep",
    "expand_grid",
    "policies",
    "devices",
    "tunables",
    "scenarios",
    "Report",
    "Run",
    "Job",
    "Group",
    "DeviceStats",
    "ResultValue",
    "Policy",
    "Tunable",
    "Device",
    "ScenarioInfo",
    "Replay",
    "ReplayResults",
    "Validation",
    "LetterTable",
    "TuneResult",
]

__version__ = "0.1.0"

ScenarioLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]
Settings = Union[None, Mapping[str, int], Iterable[str]]


def _scenario_args(scenario: ScenarioLike) -> Dict[str, Any]:
    """The (text, kind, file) that `_native` loads a scenario from."""
    if isinstance(scenario, Mapping):
        text = _native.toml_from_json(json.dumps(scenario))
        return {"scenario": text, "kind": "toml", "file": "<dict>"}
    if isinstance(scenario, os.PathLike):
        return {"scenario": os.fspath(scenario), "kind": "path"}
    if isinstance(scenario, str):
        return {"scenario": scenario, "kind": "auto"}
    raise ScenarioError(
        f"expected a built-in name, a path, TOML text or a dict, got {type(scenario).__name__}",
        key="scenario",
    )


def _settings(set: Settings) -> List[str]:
    """``{"deadline.fifo_batch": 8}`` or ``["deadline.fifo_batch=8"]`` as
    the CLI's ``--set`` strings."""
    if set is None:
        return []
    if isinstance(set, str):
        return [set]
    if isinstance(set, Mapping):
        out = []
        for k, v in set.items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise ScenarioError(f"{v!r}: a tunable's value is an integer", key=f"set.{k}")
            out.append(f"{k}={v}")
        return out
    return [str(s) for s in set]


def _names(sched: Union[None, str, Sequence[str]], key: str) -> Optional[List[str]]:
    if sched is None:
        return None
    if isinstance(sched, str):
        return [s.strip() for s in sched.split(",") if s.strip()]
    return [str(s) for s in sched]


def run(
    scenario: ScenarioLike,
    sched: Union[None, str, Sequence[str]] = None,
    device: Optional[str] = None,
    seed: Optional[int] = None,
    set: Settings = None,
) -> Report:
    """Run a scenario under each policy, as ``elevator run`` does.

    ``scenario``: a built-in name (see :func:`scenarios`), a path to a
    scenario TOML file, TOML text, or a dict of the same keys.
    ``sched``: policies to compare (a list, or ``"bfq,cfq"``; default: the
    scenario's). ``device``: a profile name (see :func:`devices`) or a
    profile TOML path (default: the scenario's). ``seed``: the seed of every
    random choice (default: the scenario's, 1 in every built-in).
    ``set``: tunable overrides, ``{"deadline.fifo_batch": 8}`` or
    ``["deadline.fifo_batch=8", "block.nr_requests=32"]``.

    Returns a :class:`Report`; ``report.to_dict()`` equals the CLI's
    ``--format json`` output. The GIL is released while it simulates.
    Raises :class:`ScenarioError` for a bad scenario, policy, device or
    tunable.
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ScenarioError(f"{seed!r}: a seed is an integer >= 0", key="seed")
    data = _native.run(
        **_scenario_args(scenario),
        sched=_names(sched, "sched"),
        device=None if device is None else os.fspath(device),
        seed=seed,
        set=_settings(set),
    )
    return Report.from_dict(data)


def policies() -> List[Policy]:
    """Every registered policy with its aliases and tunables."""
    return [Policy.from_dict(p) for p in _native.policies()]


def tunables(policy: str) -> List[Tunable]:
    """A policy's tunables (kernel names and defaults); ScenarioError if
    the policy is unknown."""
    return Policy.from_dict(_native.policy(policy)).tunables


def devices() -> List[Device]:
    """The built-in device profiles."""
    return [Device.from_dict(d) for d in _native.devices()]


def scenarios() -> List[ScenarioInfo]:
    """The built-in scenarios."""
    return [ScenarioInfo.from_dict(s) for s in _native.scenarios()]


def _variants(
    sched: Union[None, str, Sequence[str]], grid: Optional[Mapping[str, Sequence[int]]]
) -> List[Tuple[str, List[Tuple[str, int]]]]:
    """Each policy with its defaults, then its grid combinations (as the
    CLI's whatif builds them)."""
    names = _names(sched, "sched")
    if names is None:
        names = [p["name"] for p in _native.policies()]
    points = expand_grid({"sched": names, **dict(grid or {})})
    out: List[Tuple[str, List[Tuple[str, int]]]] = []
    seen = set()
    for p in points:
        name = _native.policy(p["sched"])["name"]
        if name not in seen:
            seen.add(name)
            out.append((name, []))
        tuned = [(k.rsplit(".", 1)[1], v) for k, v in p["set"].items()]
        if tuned:
            out.append((name, tuned))
    return out


def replay(
    trace: Union[str, "os.PathLike[str]"],
    device: str,
    sched: Union[str, Sequence[str]] = "noop",
    set: Settings = None,
    format: Optional[str] = None,
    closed: bool = False,
    time_scale: float = 1.0,
    think_scale: float = 1.0,
) -> ReplayResults:
    """Replay a block trace (blkparse, fio iolog, MSR, MQSim, DiskSim) on a
    device under each policy, as ``elevator replay`` does.

    ``format``: the trace format (default: told from the first line).
    ``closed``: closed loop (each process waits for its previous request,
    then its think time × ``think_scale``); default open loop at the
    recorded times × ``time_scale``. ``set``: tunables of the policies.
    Returns one :class:`Replay` per policy.
    """
    tuned: Dict[str, List[Tuple[str, int]]] = {}
    for s in _settings(set):
        policy, tunable, value = _native.check_set(s)
        tuned.setdefault(_native.policy(policy)["name"], []).append((tunable, value))
    variants = []
    for name in _names(sched, "sched") or []:
        canonical = _native.policy(name)["name"]
        variants.append((canonical, tuned.get(canonical, [])))
    rows = _native.replay_trace(
        os.fspath(trace),
        device,
        variants,
        format=format,
        closed=closed,
        time_scale=float(time_scale),
        think_scale=float(think_scale),
    )
    return ReplayResults(Replay.from_dict(r) for r in rows)


def whatif(
    trace: Union[str, "os.PathLike[str]"],
    device: str,
    sched: Union[None, str, Sequence[str]] = None,
    grid: Optional[Mapping[str, Sequence[int]]] = None,
    by: str = "p99-read",
    threads: Optional[int] = None,
    format: Optional[str] = None,
    closed: bool = False,
    time_scale: float = 1.0,
    think_scale: float = 1.0,
) -> ReplayResults:
    """Replay a trace under every policy (default: every registered one)
    and a grid of tunables, and rank them, as ``elevator whatif`` does.

    ``grid``: ``{"deadline.fifo_batch": [1, 16]}``: every combination per
    policy, beside each policy's defaults. ``by``: p99-read, mean,
    throughput, slowdown or fairness. ``threads``: worker threads (default:
    the machine's cores). Returns the replays ranked best first.
    """
    variants = _variants(sched, grid)
    rows = _native.whatif(
        os.fspath(trace),
        device,
        variants,
        by=by,
        threads=threads or os.cpu_count() or 1,
        format=format,
        closed=closed,
        time_scale=float(time_scale),
        think_scale=float(think_scale),
    )
    return ReplayResults(Replay.from_dict(r) for r in rows)


def validate(trace: Union[str, "os.PathLike[str]"], device: str) -> Validation:
    """Replay a DiskSim validation trace on a device model one request at a
    time and score the model (DiskSim's demerit), as ``elevator validate``."""
    return Validation.from_dict(_native.validate(os.fspath(trace), device))


def letter(
    devices: Union[None, str, Sequence[str]] = None,
    sched: Union[None, str, Sequence[str]] = None,
    seed: Optional[int] = None,
    think_scale: Optional[float] = None,
) -> LetterTable:
    """The 2016 BFQ cover letter's table, as ``elevator letter`` runs it:
    the start-up time of xterm, LibreOffice Writer and gnome-terminal
    (for the letter's konsole) on an idle device and against ten
    sequential or random readers, and the readers' throughput alone, under
    each policy, with the letter's figure beside ours.

    ``devices``: default ssd-sata-2016 (the letter's) and sata-hdd.
    ``sched``: default bfq, cfq, deadline, noop. ``think_scale``: factor on
    the traces' think times (default: the scenarios'). Returns a
    :class:`LetterTable` (rows with ``device``, ``background``, ``row``,
    ``scheduler``, ``value``, ``unit``, ``letter``).
    """
    rows = _native.letter(
        devices=_names(devices, "devices"),
        sched=_names(sched, "sched"),
        seed=seed,
        think_scale=None if think_scale is None else float(think_scale),
    )
    return LetterTable(rows)


def tune(
    workload: ScenarioLike,
    objective: str,
    device: Optional[str] = None,
    sched: Union[None, str, Sequence[str]] = None,
    budget: int = 64,
    seed: int = 1,
    threads: Optional[int] = None,
    cpu_cost: bool = True,
    trace: bool = False,
) -> TuneResult:
    """Search policies, tunables and block settings for ``objective``, as
    ``elevator tune`` does in the simulator (see docs/tune.md; no
    ``--verify``: that needs a real device).

    ``workload``: a scenario (what :func:`run` takes) or, with
    ``trace=True``, a block trace replayed on ``device``. ``objective``:
    e.g. ``"minimize p99(reader)"`` or ``"maximize mb_s subject to
    p99(app) < 50ms"``. ``sched``: the policies searched (default: those
    that honour what the workload uses). ``budget``: most evaluations;
    ``threads``: 0 or None for one per core. ``cpu_cost``: charge each
    policy's CPU cost per request. Returns a :class:`TuneResult`, trials
    best first.
    """
    if trace:
        args = {"workload": os.fspath(workload), "kind": "trace"}
    else:
        a = _scenario_args(workload)
        args = {"workload": a["scenario"], "kind": a["kind"], "file": a.get("file")}
    data = _native.tune(
        **args,
        objective=objective,
        device=None if device is None else os.fspath(device),
        sched=_names(sched, "sched") or [],
        budget=int(budget),
        seed=int(seed),
        threads=int(threads or 0),
        cpu_cost=bool(cpu_cost),
    )
    return TuneResult(data)
