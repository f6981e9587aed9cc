"""Typed results: a run report and its parts, in the shape of the CLI's JSON.

Each class mirrors one object of ``docs/report-schema.md``. ``to_dict()``
gives back exactly what ``elevator run --format json`` prints (the same
keys, optional keys left out where the CLI leaves them out, ``None`` where
it prints ``null``); keys a newer library adds that a class does not name
yet are kept in ``extra_fields`` and written back, so nothing is lost.
"""

from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional

# How each optional key is left out of the JSON, as serde's
# `skip_serializing_if` leaves it out in elevator-metrics' report.rs.
_OMIT = {
    "none": lambda v: v is None,
    "false": lambda v: v is False,
    "empty": lambda v: not v,
    "zero": lambda v: v == 0,
}


class _Record:
    """Shared from_dict / to_dict over the dataclass fields.

    A field's metadata may carry ``omit`` (a key of ``_OMIT``) and ``kind``
    (a _Record subclass, or ``[cls]`` for a list of them).
    """

    extra_fields: Dict[str, Any]

    @classmethod
    def from_dict(cls, data: Dict[str, Any]):
        known = {f.name: f for f in fields(cls) if f.name != "extra_fields"}
        args: Dict[str, Any] = {}
        for name, f in known.items():
            if name not in data:
                continue
            value = data[name]
            kind = f.metadata.get("kind")
            if isinstance(kind, list):
                value = [kind[0].from_dict(v) for v in value]
            elif kind is not None:
                value = kind.from_dict(value)
            args[name] = value
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**args, extra_fields=extra)

    def to_dict(self) -> Dict[str, Any]:
        """This object as the CLI's JSON has it (a new dict, deep-copied)."""
        out: Dict[str, Any] = {}
        for f in fields(self):
            if f.name == "extra_fields":
                continue
            value = getattr(self, f.name)
            omit = f.metadata.get("omit")
            if omit is not None and _OMIT[omit](value):
                continue
            out[f.name] = _plain(value)
        out.update(_plain(self.extra_fields))
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _opt(omit: str, default: Any = None, **meta: Any):
    if callable(default):
        return field(default_factory=default, metadata={"omit": omit, **meta})
    return field(default=default, metadata={"omit": omit, **meta})


@dataclass
class ResultValue(_Record):
    """A run's headline figure, named by the scenario's ``[result]``."""

    name: str
    unit: str
    #: ``None`` when the run gave none (the CLI prints ``null``).
    value: Optional[float]
    #: A lower bound: a measured job was cut by the time limit.
    cut: bool = _opt("false", False)
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class DeviceStats(_Record):
    """What the device did during a run."""

    busy_s: float
    utilization: float
    requests: int
    seeks: int
    seek_distance_sectors: int
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Job(_Record):
    """One job's figures (one task of a scenario's ``[[job]]``)."""

    name: str
    bytes: int
    read_bytes: int
    write_bytes: int
    ios: int
    iops: float
    mb_s: float
    start_s: float
    #: ``None`` if the job never finished (background loads).
    completion_s: Optional[float]
    runtime_s: float
    disk_time_s: float
    lat_mean_ms: float
    lat_p50_ms: float
    lat_p99_ms: float
    lat_p999_ms: float
    lat_max_ms: float
    pct_over_2s: float
    pct_over_10s: float
    group: Optional[str] = _opt("none")
    cut: bool = _opt("false", False)
    extra: Dict[str, float] = _opt("empty", dict)
    errors: int = _opt("zero", 0)
    calls: Dict[str, Dict[str, Any]] = _opt("empty", dict)
    output: List[str] = _opt("empty", list)
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Group(_Record):
    """What one control group's jobs did together."""

    name: str
    weight: int
    io_max: str
    tasks: int
    bytes: int
    mb_s: float
    iops: float
    lat_mean_ms: float
    lat_max_ms: float
    disk_time_s: float
    disk_share: float
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Run(_Record):
    """One policy's run of a scenario (one sweep point of it, if any)."""

    scheduler: str
    tunables: Dict[str, int]
    result: ResultValue = field(metadata={"kind": ResultValue})
    simulated_s: float = 0.0
    aggregate_mb_s: float = 0.0
    device: DeviceStats = field(default=None, metadata={"kind": DeviceStats})  # type: ignore
    jobs: List[Job] = field(default_factory=list, metadata={"kind": [Job]})
    variant: Optional[str] = _opt("none")
    block: Dict[str, str] = _opt("empty", dict)
    published: Optional[str] = _opt("none")
    groups: List[Group] = _opt("empty", list, kind=[Group])
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        """The policy, and the sweep point if any (``deadline random.count=4``)."""
        return self.scheduler if self.variant is None else f"{self.scheduler} {self.variant}"


@dataclass
class Report(_Record):
    """A scenario run under one or more policies: what ``elevator.run`` returns."""

    scenario: str
    description: str
    device: str
    seed: int
    runs: List[Run] = field(default_factory=list, metadata={"kind": [Run]})
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)

    def run(self, scheduler: str) -> Run:
        """The (first) run of ``scheduler``; KeyError if there is none."""
        for r in self.runs:
            if r.scheduler == scheduler:
                return r
        raise KeyError(scheduler)

    def to_pandas(self, per: str = "policy"):
        """A DataFrame: ``per="policy"`` (one row per run: the headline
        result, throughput and device figures), ``"job"`` (one row per run
        and job) or ``"group"`` (one row per run and control group).
        Needs pandas."""
        import pandas as pd

        rows = []
        for r in self.runs:
            base = {
                "scenario": self.scenario,
                "device": self.device,
                "seed": self.seed,
                "scheduler": r.scheduler,
                "variant": r.variant,
            }
            if per == "policy":
                rows.append(_run_row(base, r))
            elif per == "job":
                for j in r.jobs:
                    row = dict(base)
                    row.update({k: v for k, v in j.to_dict().items() if not isinstance(v, (dict, list))})
                    row["job"] = row.pop("name")
                    for k, v in j.extra.items():
                        row[k] = v
                    rows.append(row)
            elif per == "group":
                for g in r.groups:
                    row = dict(base)
                    row.update(g.to_dict())
                    row["group"] = row.pop("name")
                    rows.append(row)
            else:
                raise ValueError(f"per={per!r}: expected 'policy', 'job' or 'group'")
        return pd.DataFrame(rows)


def _run_row(base: Dict[str, Any], r: Run) -> Dict[str, Any]:
    # The policy and its headline figure first (what a printed frame shows).
    row = {"scheduler": base.get("scheduler"), "variant": base.get("variant")}
    row.update(
        {
            "result": r.result.value,
            "result_unit": r.result.unit,
            "result_cut": r.result.cut,
            "published": r.published,
            "aggregate_mb_s": r.aggregate_mb_s,
            "simulated_s": r.simulated_s,
            "utilization": r.device.utilization,
            "requests": r.device.requests,
            "seeks": r.device.seeks,
            "device_busy_s": r.device.busy_s,
            "result_name": r.result.name,
        }
    )
    for k, v in base.items():
        row.setdefault(k, v)
    return row


@dataclass
class Tunable(_Record):
    """A policy's tunable: its kernel name, default, unit and meaning."""

    name: str
    default: int
    unit: str
    about: str
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Policy(_Record):
    """A registered policy (scheduler) and its tunables."""

    name: str
    aliases: List[str]
    about: str
    honours: List[str]
    tunables: List[Tunable] = field(default_factory=list, metadata={"kind": [Tunable]})
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Device(_Record):
    """A built-in device profile."""

    name: str
    description: str
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ScenarioInfo(_Record):
    """A built-in scenario."""

    name: str
    description: str
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Replay(_Record):
    """One replay of a trace under one policy (and tunables)."""

    scheduler: str
    tunables: Dict[str, int]
    label: str
    format: str
    device: str
    processes: List[Job] = field(metadata={"kind": [Job]})
    total: Job = field(metadata={"kind": Job})
    #: p99 of read latency in ms; ``None`` if the trace has no reads.
    read_p99_ms: Optional[float]
    throughput_mb_s: float
    simulated_s: float
    events: int
    records: int
    wrapped: int
    split: int
    max_drift_ms: float
    total_drift_ms: float
    trace_span_s: float
    errors: int
    #: what-if only: place (1 = best), the metric and its value.
    rank: Optional[int] = _opt("none")
    metric: Optional[str] = _opt("none")
    value: Optional[float] = _opt("none")
    worst_slowdown: Optional[float] = _opt("none")
    fairness: Optional[float] = _opt("none")
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)

    def to_row(self) -> Dict[str, Any]:
        """One flat row (no per-process figures)."""
        row = {k: v for k, v in self.to_dict().items() if k not in ("processes", "total", "tunables")}
        for k, v in self.tunables.items():
            row[k] = v
        for k in ("lat_mean_ms", "lat_p50_ms", "lat_p99_ms", "lat_max_ms", "ios", "bytes"):
            row[k] = getattr(self.total, k)
        return row


class ReplayResults(list):
    """A list of :class:`Replay` (ranked best first for ``whatif``)."""

    def to_dict(self) -> List[Dict[str, Any]]:
        """Each replay as a dict."""
        return [r.to_dict() for r in self]

    def to_pandas(self):
        """One row per replay: the variant, the totals and the ranking."""
        import pandas as pd

        return pd.DataFrame([r.to_row() for r in self])


@dataclass
class Validation(_Record):
    """A device model scored against a DiskSim validation trace (ms)."""

    trace: str
    device: str
    requests: int
    mean_model_ms: float
    mean_measured_ms: float
    per_request_rms_ms: float
    demerit_ms: float
    demerit_unbinned_ms: float
    extra_fields: Dict[str, Any] = field(default_factory=dict, repr=False)


class LetterTable(list):
    """The 2016 letter's table: a list of row dicts (``device``,
    ``background``: idle, sequential or random; ``row``: throughput, xterm,
    oowriter or konsole; ``scheduler``; ``value`` in ``unit``, None for a
    start-up over the letter's 60 s timeout; ``letter``: the letter's
    figure as printed there, or None)."""

    def to_dict(self) -> List[Dict[str, Any]]:
        """The rows (copies)."""
        return [dict(r) for r in self]

    def to_pandas(self):
        """One row per (device, background, row, policy)."""
        import pandas as pd

        return pd.DataFrame(self.to_dict())


class TuneResult:
    """What :func:`elevator.tune` found: ``trials`` best first (each a dict
    with ``rank``, ``setting``, ``scheduler``, ``tunables``, ``block``,
    ``values`` (one per goal), ``feasible``, ``violation``, ``error``,
    ``kernel_default``), and the search's ``evaluations``, ``exhaustive``,
    ``stopped_early``, ``space_size``, ``goals``."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self._data = data
        self.workload: str = data["workload"]
        self.objective: str = data["objective"]
        self.goals: List[str] = data["goals"]
        self.trials: List[Dict[str, Any]] = data["trials"]
        self.evaluations: int = data["evaluations"]
        self.exhaustive: bool = data["exhaustive"]
        self.stopped_early: bool = data["stopped_early"]
        self.space_size: int = data["space_size"]

    @property
    def best(self) -> Optional[Dict[str, Any]]:
        """The best trial, or None if nothing ran."""
        return self.trials[0] if self.trials else None

    def to_dict(self) -> Dict[str, Any]:
        """Everything, as plain values."""
        import copy

        return copy.deepcopy(self._data)

    def to_pandas(self):
        """One row per trial: the setting, each goal's value, feasibility."""
        import pandas as pd

        rows = []
        for t in self.trials:
            row = {k: v for k, v in t.items() if k not in ("values", "tunables", "block")}
            for goal, value in zip(self.goals, t["values"]):
                row[goal] = value
            rows.append(row)
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        best = self.best["setting"] if self.best else None
        return f"TuneResult({self.objective!r}, {self.evaluations} evaluations, best={best!r})"
