"""The Rust extension behind `elevator` (pyo3). Plain values in, the CLI's
JSON shapes out; the typed API is in `elevator/__init__.py`."""

from typing import Any, Dict, List, Optional, Tuple

Json = Any
Variants = List[Tuple[str, List[Tuple[str, int]]]]

def run(
    scenario: str,
    kind: str = "auto",
    file: Optional[str] = None,
    sched: Optional[List[str]] = None,
    device: Optional[str] = None,
    seed: Optional[int] = None,
    set: List[str] = ...,
) -> Dict[str, Json]:
    """Run a scenario (kind: auto, path or toml); the report as a dict."""

def describe(scenario: str, kind: str = "auto", file: Optional[str] = None) -> Dict[str, Json]:
    """A scenario's own name, description, device, policies, seed and sweep points."""

def toml_from_json(text: str) -> str:
    """TOML text from JSON text (a scenario given as a dict)."""

def policies() -> List[Dict[str, Json]]:
    """Every registered policy."""

def policy(name: str) -> Dict[str, Json]:
    """One policy by name or alias."""

def devices() -> List[Dict[str, str]]:
    """The built-in device profiles."""

def scenarios() -> List[Dict[str, str]]:
    """The built-in scenarios."""

def replay_trace(
    trace: str,
    device: str,
    variants_list: Variants,
    format: Optional[str] = None,
    closed: bool = False,
    time_scale: float = 1.0,
    think_scale: float = 1.0,
) -> List[Dict[str, Json]]:
    """Replay a trace under each variant."""

def whatif(
    trace: str,
    device: str,
    variants_list: Variants,
    by: str = "p99-read",
    threads: int = 2,
    format: Optional[str] = None,
    closed: bool = False,
    time_scale: float = 1.0,
    think_scale: float = 1.0,
) -> List[Dict[str, Json]]:
    """Replay under every variant and rank, best first."""

def validate(trace: str, device: str) -> Dict[str, Json]:
    """Score a device model against a DiskSim validation trace."""

def check_set(setting: str) -> Tuple[str, str, int]:
    """Check `POLICY.TUNABLE=VALUE`."""

def letter(
    devices: Optional[List[str]] = None,
    sched: Optional[List[str]] = None,
    seed: Optional[int] = None,
    think_scale: Optional[float] = None,
) -> List[Dict[str, Json]]:
    """The 2016 letter's table as rows."""

def tune(
    workload: str,
    objective: str,
    kind: str = "auto",
    file: Optional[str] = None,
    device: Optional[str] = None,
    sched: List[str] = ...,
    budget: int = 64,
    seed: int = 1,
    threads: int = 0,
    cpu_cost: bool = True,
) -> Dict[str, Json]:
    """Search settings for an objective; trials best first."""
