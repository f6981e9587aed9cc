"""Sweeps: one workload over the cartesian product of policies, tunables,
devices and seeds, evaluated in parallel on local threads or as Ray tasks.

Each evaluation is one :func:`elevator.run` of the workload under one
policy with one setting; the simulator is deterministic (time is an
argument, randomness comes from the seed), so an evaluation gives the same
numbers wherever it runs, and the sweep's DataFrame (rows in the grid's
order, not in order of completion) is the same on either backend.
"""

import itertools
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import _native
from ._errors import ScenarioError

#: Grid keys that are not tunables.
_AXES = ("sched", "device", "seed")


def _listed(key: str, values: Any) -> List[Any]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        values = [values]
    if len(values) == 0:
        raise ScenarioError("an axis of the grid needs at least one value", key=f"grid.{key}")
    return list(values)


def expand_grid(grid: Mapping[str, Any], default_sched: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """The points of a sweep grid, in order.

    ``grid`` keys: ``"sched"`` (policies; default ``default_sched``),
    ``"device"`` and ``"seed"`` (default: the workload's own), and tunables
    ``"POLICY.TUNABLE"`` or block settings ``"block.NAME"`` with a list of
    integer values each. A policy's tunable axes multiply only that policy's
    points (``deadline.fifo_batch`` does not multiply ``bfq``); block axes
    multiply every point. Each point is ``{"sched", "device", "seed",
    "set": {"POLICY.TUNABLE": value, ...}}``. Unknown policies or tunable
    names raise :class:`ScenarioError` here, before anything runs.
    """
    unknown_axes = []
    scheds = grid.get("sched", default_sched)
    if scheds is None:
        raise ScenarioError("the grid names no policy (key `sched`)", key="grid.sched")
    scheds = _listed("sched", scheds)
    devices = _listed("device", grid.get("device", [None]))
    seeds = _listed("seed", grid.get("seed", [None]))
    # Tunable axes by canonical policy name; block axes for everyone.
    by_policy: Dict[str, List[tuple]] = {}
    block: List[tuple] = []
    for key, values in grid.items():
        if key in _AXES:
            continue
        if "." not in key:
            unknown_axes.append(key)
            continue
        policy, tunable = key.rsplit(".", 1)
        values = _listed(key, values)
        if policy == "block":
            block.append((key, values))
            continue
        p = _native.policy(policy)
        names = [t["name"] for t in p["tunables"]]
        if tunable not in names:
            raise ScenarioError(
                f"{p['name']} has no tunable {tunable!r} (known: {', '.join(names) or 'none'})",
                key=f"grid.{key}",
            )
        by_policy.setdefault(p["name"], []).append((key, values))
    if unknown_axes:
        raise ScenarioError(
            f"unknown grid keys {unknown_axes}: expected sched, device, seed, "
            "POLICY.TUNABLE or block.NAME",
            key="grid",
        )
    points = []
    for sched in scheds:
        canonical = _native.policy(str(sched))["name"]
        axes = by_policy.get(canonical, []) + block
        keys = [k for k, _ in axes]
        for combo in itertools.product(*[v for _, v in axes]):
            for device in devices:
                for seed in seeds:
                    points.append(
                        {
                            "sched": str(sched),
                            "device": device,
                            "seed": seed,
                            "set": dict(zip(keys, combo)),
                        }
                    )
    return points


def _workload_args(workload: Any) -> Dict[str, Any]:
    """The workload as text a worker on any machine can load: a file is
    read here (its errors still name the file)."""
    from . import _scenario_args

    args = _scenario_args(workload)
    path = args["scenario"]
    is_file = args["kind"] == "path" or (
        args["kind"] == "auto" and "\n" not in path and os.path.isfile(path)
    )
    if is_file and not any(s["name"] == path for s in _native.scenarios()):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ScenarioError(f"reading: {e}", file=path) from None
        args = {"scenario": text, "kind": "toml", "file": path}
    return args


def _settings_row(point: Dict[str, Any]) -> Dict[str, Any]:
    row = {"sched": point["sched"], "device": point["device"], "seed": point["seed"]}
    row.update(point["set"])
    return row


def evaluate(workload_args: Dict[str, Any], point: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One point of a sweep: the rows of its runs (one, or one per sweep
    point of the scenario), or one row with ``error`` set. Never raises for
    a failed run: a sweep reports it with its settings."""
    from ._results import Report, _run_row

    settings = _settings_row(point)
    try:
        data = _native.run(
            **workload_args,
            sched=[point["sched"]],
            device=point["device"],
            seed=point["seed"],
            set=[f"{k}={v}" for k, v in point["set"].items()],
        )
    except Exception as e:  # reported, with its settings, in the frame
        return [dict(settings, error=f"{type(e).__name__}: {e}")]
    report = Report.from_dict(data)
    rows = []
    for r in report.runs:
        row = dict(settings)
        row.update(
            _run_row(
                {"scheduler": r.scheduler, "variant": r.variant, "used_device": report.device,
                 "used_seed": report.seed},
                r,
            )
        )
        row["error"] = None
        rows.append(row)
    return rows


def _bar(total: int, progress: Optional[bool], backend: str):
    if progress is False or (progress is None and total < 20):
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if progress:
            raise
        return None
    return tqdm(total=total, desc=f"sweep ({backend})", unit="run")


def sweep(
    workload: Any,
    grid: Mapping[str, Any],
    backend: str = "local",
    workers: Optional[int] = None,
    progress: Optional[bool] = None,
    address: Optional[str] = None,
):
    """Run ``workload`` at every point of ``grid`` in parallel; one
    DataFrame, one row per run, in the grid's order.

    ``workload``: what :func:`elevator.run` takes (a built-in name, a path,
    TOML text or a dict). ``grid``: see :func:`expand_grid`, e.g.
    ``{"sched": ["deadline", "bfq"], "deadline.fifo_batch": [1, 16],
    "seed": range(1, 11)}``. ``backend="local"``: a pool of ``workers``
    threads (default: the machine's cores; the simulator releases the
    GIL). ``backend="ray"``: each evaluation a Ray task on the cluster
    ``ray.init(address=address)`` joins (a local one when ``address`` is
    None), unless Ray is already initialised. ``progress``: a tqdm bar
    (default: on for 20 runs or more, if tqdm is installed).

    Columns: the settings (``sched``, ``device``, ``seed``, one per grid
    tunable), then the run's figures (``scheduler``, ``variant``,
    ``result``, ``aggregate_mb_s``, ...) and ``error``: None, or the failure
    of that evaluation (its settings are on the same row). Needs pandas.
    """
    import pandas as pd

    args = _workload_args(workload)
    info = _native.describe(**args)
    points = expand_grid(grid, default_sched=info["schedulers"])
    results: List[Optional[List[Dict[str, Any]]]] = [None] * len(points)
    bar = _bar(len(points), progress, backend)
    try:
        if backend == "local":
            _local(args, points, results, workers, bar)
        elif backend == "ray":
            _ray(args, points, results, address, bar)
        else:
            raise ScenarioError(f"{backend!r}: expected 'local' or 'ray'", key="backend")
    finally:
        if bar is not None:
            bar.close()
    rows = [row for rs in results for row in (rs or [])]
    frame = pd.DataFrame(rows)
    failed = int(frame["error"].notna().sum()) if "error" in frame else 0
    frame.attrs["failed"] = failed
    return frame


def _local(args, points, results, workers, bar) -> None:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    workers = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(evaluate, args, p): i for i, p in enumerate(points)}
        for f in as_completed(futures):
            results[futures[f]] = f.result()
            if bar is not None:
                bar.update(1)


def _evaluate_batch(workload_args: Dict[str, Any], batch: List[Dict[str, Any]]) -> List[Any]:
    """`evaluate` over several points in one Ray task, each point's error kept to itself."""
    out: List[Any] = []
    for point in batch:
        try:
            out.append(evaluate(workload_args, point))
        except Exception as e:  # reported with its settings, as the local backend does
            out.append([dict(_settings_row(point), error=f"{type(e).__name__}: {e}")])
    return out


def _ray(args, points, results, address, bar) -> None:
    import ray

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    # A run takes milliseconds, a Ray task costs about as much to schedule: points go out in
    # batches, eight per CPU of the cluster. A batch takes every n-th point rather than a run of
    # neighbours: the grid varies the policy slowest, and a batch of bfq runs costs several of
    # noop, so contiguous batches leave one CPU working alone at the end.
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    count = min(len(points), cpus * 8)
    batches = [list(range(k, len(points), count)) for k in range(count)]
    task = ray.remote(num_cpus=1, max_retries=0)(_evaluate_batch)
    args_ref = ray.put(args)
    pending = {task.remote(args_ref, [points[i] for i in b]): b for b in batches}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=min(len(pending), 16), timeout=0.5)
        for ref in done:
            batch = pending.pop(ref)
            try:
                rows = ray.get(ref)
            except Exception as e:  # a worker that died: reported with its settings
                rows = [
                    [dict(_settings_row(points[i]), error=f"{type(e).__name__}: {e}")] for i in batch
                ]
            for i, r in zip(batch, rows):
                results[i] = r
            if bar is not None:
                bar.update(len(batch))
