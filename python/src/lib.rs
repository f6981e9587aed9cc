//! `elevator._native`: the simulator behind the Python package `elevator`.
//!
//! Thin by design: every function here calls the library crates the CLI
//! calls (`elevator-scenario`'s `Scenario::parse`, `builtin`, `run`,
//! `replay`, `whatif` and `validate`; `elevator-sched`'s registry;
//! `elevator-device`'s profiles) and hands back plain Python values (dicts,
//! lists, numbers) in the shape of the CLI's JSON (`docs/report-schema.md`).
//! The typed classes, the argument handling that is Python's business and
//! the sweeps live in the pure-Python part of the package
//! (`python/elevator/`).
//!
//! Every simulation runs with the GIL released (`Python::allow_threads`), so
//! Python threads that call in run in parallel. Errors come back as
//! `elevator.ScenarioError` with the file, line and key the library names;
//! a panic in the library becomes Python's `PanicException`, never an abort.

use elevator_scenario::replay::{self, Metric, ReplayConfig, ReplayOutcome, Variant};
use elevator_scenario::{RunOptions, Scenario, ScenarioError};
use elevator_workload::trace::{ReplayMode, TraceFormat};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::{json, Value};

/// Raise `elevator.ScenarioError(message, file, line, key)`.
fn raise(py: Python<'_>, e: &ScenarioError) -> PyErr {
    let class = match py
        .import("elevator._errors")
        .and_then(|m| m.getattr("ScenarioError"))
    {
        Ok(class) => class,
        Err(err) => return err,
    };
    match class.call1((e.message.clone(), e.file.clone(), e.line, e.key.clone())) {
        Ok(instance) => PyErr::from_value(instance),
        Err(err) => err,
    }
}

/// An error in the arguments of a call (not in a file).
fn arg_error(key: &str, message: impl Into<String>) -> ScenarioError {
    ScenarioError::new("<arguments>", None, Some(key), message)
}

/// The policy `name` names, by the stack builder's one rule, or its error
/// as argument `key`'s.
fn known_policy(
    name: &str,
    key: &str,
) -> Result<&'static elevator_sched::SchedulerType, ScenarioError> {
    elevator_sched::stack::policy(name, elevator_sched::stack::Origin::command_line())
        .map_err(|e| arg_error(key, e.message()))
}

/// A JSON value as the Python value `json.loads` would give for its text.
fn to_py(py: Python<'_>, value: &Value) -> PyResult<PyObject> {
    Ok(match value {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64()
                    .unwrap_or(f64::NAN)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

fn serialize<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("reports serialise")
}

/// Where a scenario comes from: a built-in name, a file, or TOML text.
fn load(spec: &str, kind: &str, file: Option<&str>) -> Result<Scenario, ScenarioError> {
    match kind {
        "toml" => Scenario::parse(file.unwrap_or("<string>"), spec),
        "path" => read_file(spec),
        "auto" => {
            if let Some(s) = elevator_scenario::builtin(spec) {
                return s;
            }
            if std::fs::metadata(spec).is_ok() {
                return read_file(spec);
            }
            if spec.contains('\n') || spec.contains('=') {
                return Scenario::parse(file.unwrap_or("<string>"), spec);
            }
            let known: Vec<&str> = elevator_scenario::builtins()
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            Err(arg_error(
                "scenario",
                format!(
                    "no scenario {spec:?}: not a built-in ({}), no such file, and not TOML text",
                    known.join(", ")
                ),
            ))
        }
        other => Err(arg_error(
            "kind",
            format!("{other:?}: expected auto, path or toml"),
        )),
    }
}

fn read_file(path: &str) -> Result<Scenario, ScenarioError> {
    let text = elevator_device::read_input(
        std::path::Path::new(path),
        elevator_scenario::MAX_SCENARIO_BYTES,
    )
    .map_err(|e| ScenarioError::new(path, None, None, format!("reading: {e}")))?;
    Scenario::parse(path, &text)
}

/// `POLICY.TUNABLE=VALUE` checked as the CLI's `--set` checks it (one
/// parser for both: [`elevator_sched::stack::parse_override`]).
fn parse_set(s: &str) -> Result<(String, String, i64), ScenarioError> {
    elevator_sched::stack::parse_override(s).map_err(|e| {
        // Name the setting as `set.POLICY.TUNABLE` when the text got that far.
        let key = match s.split_once('=') {
            Some((k, _)) if k.contains('.') => format!("set.{}", k.trim()),
            _ => "set".to_string(),
        };
        arg_error(&key, e.message())
    })
}

fn check_policies(sched: &Option<Vec<String>>) -> Result<(), ScenarioError> {
    for p in sched.iter().flatten() {
        known_policy(p, "sched")?;
    }
    Ok(())
}

fn check_device(device: &str) -> Result<(), ScenarioError> {
    elevator_device::open(device)
        .map(|_| ())
        .map_err(|e| arg_error("device", format!("{device:?}: {e}")))
}

/// Run a scenario under each policy; the report as the CLI's JSON has it.
#[pyfunction]
#[pyo3(signature = (scenario, kind="auto", file=None, sched=None, device=None, seed=None, set=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    scenario: &str,
    kind: &str,
    file: Option<&str>,
    sched: Option<Vec<String>>,
    device: Option<String>,
    seed: Option<u64>,
    set: Vec<String>,
) -> PyResult<PyObject> {
    let prepared = (|| {
        let parsed = load(scenario, kind, file)?;
        check_policies(&sched)?;
        if let Some(d) = &device {
            check_device(d)?;
        }
        let tunables = set
            .iter()
            .map(|s| parse_set(s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((parsed, tunables))
    })();
    let (parsed, tunables) = prepared.map_err(|e| raise(py, &e))?;
    let options = RunOptions {
        schedulers: sched,
        device,
        seed,
        tunables,
        ..RunOptions::default()
    };
    let report = py
        .allow_threads(|| elevator_scenario::run(&parsed, &options, &mut |_| {}))
        .map_err(|e| raise(py, &e))?;
    to_py(py, &serialize(&report))
}

/// A scenario's own settings (no run): name, description, device,
/// policies, seed, and how many sweep points it has.
#[pyfunction]
#[pyo3(signature = (scenario, kind="auto", file=None))]
fn describe(py: Python<'_>, scenario: &str, kind: &str, file: Option<&str>) -> PyResult<PyObject> {
    let s = load(scenario, kind, file).map_err(|e| raise(py, &e))?;
    let value = json!({
        "file": s.file,
        "name": s.name,
        "description": s.description,
        "device": s.device,
        "schedulers": s.schedulers,
        "seed": s.seed,
        "sweep_points": s.sweep_points(),
    });
    to_py(py, &value)
}

/// TOML text from a JSON text (a scenario given as a Python dict).
#[pyfunction]
fn toml_from_json(py: Python<'_>, text: &str) -> PyResult<String> {
    let value: toml::Value = serde_json::from_str(text).map_err(|e| {
        raise(
            py,
            &arg_error("scenario", format!("not a TOML-shaped mapping: {e}")),
        )
    })?;
    toml::to_string(&value).map_err(|e| {
        raise(
            py,
            &arg_error("scenario", format!("cannot be written as TOML: {e}")),
        )
    })
}

/// Every registered policy with its aliases, what it honours and its
/// tunables (kernel names and defaults).
#[pyfunction]
fn policies(py: Python<'_>) -> PyResult<PyObject> {
    let list: Vec<Value> = elevator_sched::registry().iter().map(policy_json).collect();
    to_py(py, &Value::Array(list))
}

fn policy_json(t: &elevator_sched::SchedulerType) -> Value {
    json!({
        "name": t.name,
        "aliases": t.aliases,
        "about": t.about,
        "honours": t.honours,
        "tunables": t.tunables.iter().map(|k| json!({
            "name": k.name, "default": k.default, "unit": k.unit, "about": k.about,
        })).collect::<Vec<_>>(),
    })
}

/// One policy (by name or alias), as `policies()` lists it.
#[pyfunction]
fn policy(py: Python<'_>, name: &str) -> PyResult<PyObject> {
    let t = known_policy(name, "policy").map_err(|e| raise(py, &e))?;
    to_py(py, &policy_json(t))
}

/// The built-in device profiles: name and description.
#[pyfunction]
fn devices(py: Python<'_>) -> PyResult<PyObject> {
    let list: Vec<Value> = elevator_device::builtin_profiles()
        .into_iter()
        .map(|(name, about)| json!({ "name": name, "description": about }))
        .collect();
    to_py(py, &Value::Array(list))
}

/// The built-in scenarios: name and description.
#[pyfunction]
fn scenarios(py: Python<'_>) -> PyResult<PyObject> {
    let list: Vec<Value> = elevator_scenario::builtins()
        .into_iter()
        .map(|(name, about)| json!({ "name": name, "description": about }))
        .collect();
    to_py(py, &Value::Array(list))
}

/// The replay settings the CLI's `TraceArgs` builds.
fn replay_config(
    trace: &str,
    device: &str,
    format: Option<&str>,
    closed: bool,
    time_scale: f64,
    think_scale: f64,
) -> Result<ReplayConfig, ScenarioError> {
    let format = match format {
        None => None,
        Some(f) => Some(TraceFormat::from_name(f).ok_or_else(|| {
            arg_error(
                "format",
                format!(
                    "{f:?}: unknown (known: {})",
                    TraceFormat::ALL.map(TraceFormat::name).join(", ")
                ),
            )
        })?),
    };
    for (key, v) in [("time_scale", time_scale), ("think_scale", think_scale)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(arg_error(key, format!("{v}: want a finite number >= 0")));
        }
    }
    check_device(device)?;
    Ok(ReplayConfig {
        trace: trace.to_string(),
        format,
        device: device.to_string(),
        mode: if closed {
            ReplayMode::Closed { think_scale }
        } else {
            ReplayMode::Open { time_scale }
        },
    })
}

fn outcome_json(o: &ReplayOutcome) -> Value {
    let s = &o.summary;
    json!({
        "scheduler": o.variant.policy,
        "tunables": o.variant.tunables.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        "label": o.variant.label(),
        "format": o.format.name(),
        "device": o.device,
        "processes": serialize(&o.processes),
        "total": serialize(&o.total),
        "read_p99_ms": o.read_p99_ms,
        "throughput_mb_s": o.throughput_mb_s(),
        "simulated_s": o.end.as_secs_f64(),
        "events": o.events,
        "records": s.records,
        "wrapped": s.wrapped,
        "split": s.split,
        "max_drift_ms": s.max_drift.as_secs_f64() * 1e3,
        "total_drift_ms": s.total_drift.as_secs_f64() * 1e3,
        "trace_span_s": s.trace_span.as_secs_f64(),
        "errors": s.errors,
    })
}

fn variants(list: Vec<(String, Vec<(String, i64)>)>) -> Result<Vec<Variant>, ScenarioError> {
    list.into_iter()
        .map(|(policy, tunables)| {
            let t = known_policy(&policy, "sched")?;
            let v = Variant {
                policy: t.name.to_string(),
                tunables,
            };
            replay::check_variant(&v)?;
            Ok(v)
        })
        .collect()
}

/// Replay a block trace under each variant `(policy, [(tunable, value)])`.
#[pyfunction]
#[pyo3(signature = (trace, device, variants_list, format=None, closed=false, time_scale=1.0, think_scale=1.0))]
#[allow(clippy::too_many_arguments)]
fn replay_trace(
    py: Python<'_>,
    trace: &str,
    device: &str,
    variants_list: Vec<(String, Vec<(String, i64)>)>,
    format: Option<&str>,
    closed: bool,
    time_scale: f64,
    think_scale: f64,
) -> PyResult<PyObject> {
    let config = replay_config(trace, device, format, closed, time_scale, think_scale)
        .map_err(|e| raise(py, &e))?;
    let variants = variants(variants_list).map_err(|e| raise(py, &e))?;
    let outcomes = py
        .allow_threads(|| {
            variants
                .iter()
                .map(|v| replay::replay(&config, v))
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| raise(py, &e))?;
    to_py(
        py,
        &Value::Array(outcomes.iter().map(outcome_json).collect()),
    )
}

/// Replay under every variant on `threads` threads and rank by `by`.
#[pyfunction]
#[pyo3(signature = (trace, device, variants_list, by="p99-read", threads=2, format=None, closed=false, time_scale=1.0, think_scale=1.0))]
#[allow(clippy::too_many_arguments)]
fn whatif(
    py: Python<'_>,
    trace: &str,
    device: &str,
    variants_list: Vec<(String, Vec<(String, i64)>)>,
    by: &str,
    threads: usize,
    format: Option<&str>,
    closed: bool,
    time_scale: f64,
    think_scale: f64,
) -> PyResult<PyObject> {
    let config = replay_config(trace, device, format, closed, time_scale, think_scale)
        .map_err(|e| raise(py, &e))?;
    let metric = Metric::from_name(by).ok_or_else(|| {
        let known: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
        raise(
            py,
            &arg_error(
                "by",
                format!("{by:?}: unknown (known: {})", known.join(", ")),
            ),
        )
    })?;
    let variants = variants(variants_list).map_err(|e| raise(py, &e))?;
    let ranked = py
        .allow_threads(|| replay::whatif(&config, &variants, metric, threads, &|_| {}))
        .map_err(|e| raise(py, &e))?;
    let rows: Vec<Value> = ranked
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut row = outcome_json(&r.outcome);
            row["rank"] = json!(i + 1);
            row["metric"] = json!(metric.name());
            row["value"] = json!(r.value(metric));
            row["worst_slowdown"] = json!(r.worst_slowdown);
            row["fairness"] = json!(r.fairness);
            row
        })
        .collect();
    to_py(py, &Value::Array(rows))
}

/// Replay a DiskSim validation trace on a device model, one request at a
/// time, and score the model against the measured service times.
#[pyfunction]
fn validate(py: Python<'_>, trace: &str, device: &str) -> PyResult<PyObject> {
    let v = py
        .allow_threads(|| elevator_scenario::validate::validate(trace, device))
        .map_err(|e| raise(py, &e))?;
    let value = json!({
        "trace": v.trace,
        "device": v.device,
        "requests": v.requests,
        "mean_model_ms": v.mean_model_ms,
        "mean_measured_ms": v.mean_measured_ms,
        "per_request_rms_ms": v.per_request_rms_ms,
        "demerit_ms": v.demerit_ms,
        "demerit_unbinned_ms": v.demerit_unbinned_ms,
    });
    to_py(py, &value)
}

/// The 2016 BFQ cover letter's table (`elevator letter`): one row per
/// (device, background, row, policy) with ours and the letter's figure.
#[pyfunction]
#[pyo3(signature = (devices=None, sched=None, seed=None, think_scale=None))]
fn letter(
    py: Python<'_>,
    devices: Option<Vec<String>>,
    sched: Option<Vec<String>>,
    seed: Option<u64>,
    think_scale: Option<f64>,
) -> PyResult<PyObject> {
    use elevator_scenario::letter::{self, Background, LetterOptions, APPS};
    let mut options = LetterOptions::default();
    if let Some(d) = devices {
        options.devices = d;
    }
    if let Some(s) = sched {
        options.schedulers = s;
    }
    options.seed = seed;
    options.think_scale = think_scale;
    let checked = (|| {
        check_policies(&Some(options.schedulers.clone()))?;
        for d in &options.devices {
            check_device(d)?;
        }
        Ok(())
    })();
    checked.map_err(|e| raise(py, &e))?;
    let report = py
        .allow_threads(|| letter::run_letter(&options, &mut |_| {}))
        .map_err(|e| raise(py, &e))?;
    let name = |bg: Background| match bg {
        Background::Idle => "idle",
        Background::Sequential => "sequential",
        Background::Random => "random",
    };
    let mut rows = Vec::new();
    for d in &report.devices {
        for bg in [Background::Idle, Background::Sequential, Background::Random] {
            for sched in &report.schedulers {
                if bg != Background::Idle {
                    rows.push(json!({
                        "device": d.device, "background": name(bg), "row": "throughput",
                        "scheduler": sched, "unit": "MiB/s",
                        "value": d.throughput(bg, sched),
                        "during_startups": d.throughput_during.get(&(bg, sched.clone())),
                        "letter": letter::letter_figure("throughput", bg, sched),
                    }));
                }
                for &(row, _, app) in &APPS {
                    rows.push(json!({
                        "device": d.device, "background": name(bg), "row": row,
                        "application": app, "scheduler": sched, "unit": "s",
                        "value": d.startup(bg, row, sched),
                        "timed_out": d.startup.get(&(bg, row.to_string(), sched.clone()))
                            .is_some_and(|v| v.is_none()),
                        "letter": letter::letter_figure(row, bg, sched),
                    }));
                }
            }
        }
    }
    to_py(py, &Value::Array(rows))
}

/// Search policies, tunables and block settings for `objective` on a
/// scenario (or a trace with `device`), as `elevator tune` does without
/// `--verify`: every trial ranked best first, failures included.
#[pyfunction]
#[pyo3(signature = (workload, objective, kind="auto", file=None, device=None, sched=Vec::new(), budget=64, seed=1, threads=0, cpu_cost=true))]
#[allow(clippy::too_many_arguments)]
fn tune(
    py: Python<'_>,
    workload: &str,
    objective: &str,
    kind: &str,
    file: Option<&str>,
    device: Option<String>,
    sched: Vec<String>,
    budget: usize,
    seed: u64,
    threads: usize,
    cpu_cost: bool,
) -> PyResult<PyObject> {
    use elevator_tune::eval::{evaluate, EvalOptions, TuneWorkload};
    use elevator_tune::objective::Objective;
    use elevator_tune::search::{search, SearchOptions};
    use elevator_tune::space::{Setting, Space};
    let prepared = (|| {
        let objective =
            Objective::parse(objective).map_err(|e| arg_error("objective", e.to_string()))?;
        // A trace file (not a scenario) is replayed on `device`.
        let is_trace = kind == "trace";
        let workload = if is_trace {
            let device = device
                .clone()
                .ok_or_else(|| arg_error("device", "a trace needs a device"))?;
            TuneWorkload::Trace(ReplayConfig {
                trace: workload.to_string(),
                format: None,
                device,
                mode: ReplayMode::Open { time_scale: 1.0 },
            })
        } else {
            TuneWorkload::Scenario(Box::new(load(workload, kind, file)?))
        };
        let eval_options = EvalOptions {
            device: device.clone(),
            seed,
            cpu_cost,
        };
        let dev = workload
            .device(&eval_options)
            .map_err(|e| arg_error("device", e))?;
        check_device(&dev)?;
        let limits = elevator_device::open(&dev)
            .map_err(|e| arg_error("device", format!("{dev:?}: {e}")))?
            .limits();
        let space = Space::new(
            &sched,
            workload.uses(),
            workload.block_axes(limits.rotational),
        )
        .map_err(|e| arg_error("sched", e))?;
        let kernel_default = Setting::defaults(elevator_tune::apply::kernel_default(&limits));
        Ok((objective, workload, eval_options, space, kernel_default))
    })();
    let (objective, workload, eval_options, space, kernel_default) =
        prepared.map_err(|e: ScenarioError| raise(py, &e))?;
    let mut baselines = vec![kernel_default.clone()];
    baselines.extend(space.policies.iter().map(|p| Setting::defaults(&p.policy)));
    let options = SearchOptions {
        budget,
        exhaustive_limit: budget as u64,
        seed,
        threads,
        ..SearchOptions::default()
    };
    let result = py.allow_threads(|| {
        let eval = |s: &Setting| evaluate(&workload, s, &eval_options);
        search(&space, &objective, &eval, &baselines, &options, &|_, _| {})
    });
    let trials: Vec<Value> = result
        .ranked
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (values, feasible, violation, error) = match &t.score {
                Ok(s) => (s.values.clone(), s.feasible(), s.violation, None),
                Err(e) => (Vec::new(), false, 0.0, Some(e.clone())),
            };
            json!({
                "rank": i + 1,
                "setting": t.setting.to_string(),
                "scheduler": t.setting.policy,
                "tunables": t.setting.tunables.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                "block": t.setting.block.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                "values": values,
                "feasible": feasible,
                "violation": violation,
                "error": error,
                "kernel_default": t.setting == kernel_default,
            })
        })
        .collect();
    let value = json!({
        "workload": workload.name(),
        "objective": objective.text,
        "goals": objective.goals.iter().map(|g| g.metric.to_string()).collect::<Vec<_>>(),
        "exhaustive": result.exhaustive,
        "evaluations": result.evaluations,
        "stopped_early": result.stopped_early,
        "space_size": result.space_size,
        "trials": trials,
    });
    to_py(py, &value)
}

/// Check a `POLICY.TUNABLE=VALUE` setting; `(policy, tunable, value)`.
#[pyfunction]
fn check_set(py: Python<'_>, setting: &str) -> PyResult<(String, String, i64)> {
    parse_set(setting).map_err(|e| raise(py, &e))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(describe, m)?)?;
    m.add_function(wrap_pyfunction!(toml_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(policy, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(replay_trace, m)?)?;
    m.add_function(wrap_pyfunction!(whatif, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(check_set, m)?)?;
    m.add_function(wrap_pyfunction!(letter, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add("__doc__", "The simulator behind the `elevator` package.")?;
    Ok(())
}
