"""Type stubs of the public API of `elevator` (docstrings are in the sources)."""

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import pandas

from ._errors import ScenarioError as ScenarioError
from ._results import (
    Device as Device,
    DeviceStats as DeviceStats,
    Group as Group,
    Job as Job,
    Policy as Policy,
    Replay as Replay,
    ReplayResults as ReplayResults,
    Report as Report,
    ResultValue as ResultValue,
    Run as Run,
    ScenarioInfo as ScenarioInfo,
    Tunable as Tunable,
    Validation as Validation,
    LetterTable as LetterTable,
    TuneResult as TuneResult,
)

__version__: str
__all__: List[str]

ScenarioLike = Union[str, os.PathLike[str], Mapping[str, Any]]
Settings = Union[None, Mapping[str, int], Iterable[str]]
PathLike = Union[str, os.PathLike[str]]

def run(
    scenario: ScenarioLike,
    sched: Union[None, str, Sequence[str]] = None,
    device: Optional[str] = None,
    seed: Optional[int] = None,
    set: Settings = None,
) -> Report: ...
def policies() -> List[Policy]: ...
def tunables(policy: str) -> List[Tunable]: ...
def devices() -> List[Device]: ...
def scenarios() -> List[ScenarioInfo]: ...
def replay(
    trace: PathLike,
    device: str,
    sched: Union[str, Sequence[str]] = "noop",
    set: Settings = None,
    format: Optional[str] = None,
    closed: bool = False,
    time_scale: float = 1.0,
    think_scale: float = 1.0,
) -> ReplayResults: ...
def whatif(
    trace: PathLike,
    device: str,
    sched: Union[None, str, Sequence[str]] = None,
    grid: Optional[Mapping[str, Sequence[int]]] = None,
    by: str = "p99-read",
    threads: Optional[int] = None,
    format: Optional[str] = None,
    closed: bool = False,
    time_scale: float = 1.0,
    think_scale: float = 1.0,
) -> ReplayResults: ...
def validate(trace: PathLike, device: str) -> Validation: ...
def letter(
    devices: Union[None, str, Sequence[str]] = None,
    sched: Union[None, str, Sequence[str]] = None,
    seed: Optional[int] = None,
    think_scale: Optional[float] = None,
) -> LetterTable: ...
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
) -> TuneResult: ...
def expand_grid(
    grid: Mapping[str, Any], default_sched: Optional[Sequence[str]] = None
) -> List[Dict[str, Any]]: ...
def sweep(
    workload: ScenarioLike,
    grid: Mapping[str, Any],
    backend: str = "local",
    workers: Optional[int] = None,
    progress: Optional[bool] = None,
    address: Optional[str] = None,
) -> pandas.DataFrame: ...
