//! `[[startup]]` sections: application start-ups replayed from real
//! cold-cache block traces (see `elevator_workload::startup`).
//!
//! ```toml
//! [[startup]]
//! name = "xterm"        # the report row; its `startup_s` figure is the start-up time
//! trace = "xterm"       # a trace in ../shared/traces/startup, or a path to a .trace file
//! start = "10s"         # when the application is launched
//! offset = "900g"       # where its processes' 20 MB regions begin
//! think_scale = 1.0     # multiplies the trace's think times (default 1: as recorded)
//! ```
//!
//! Traces are looked up by name in the shared trace folder (the
//! repository's sibling `../shared/traces/startup`, or `$ELEVATOR_TRACES`),
//! and read when the scenario runs, so a scenario that names a missing
//! trace parses but fails to run, naming the file it looked for.

use crate::ctx::Ctx;
use crate::units::parse_duration;
use crate::ScenarioError;
use elevator_core::{Duration, QueueLimits, SECTOR_SIZE};
use elevator_workload::{Part, StartupReplay, StartupTrace};
use serde::Deserialize;
use std::path::PathBuf;
use toml::Spanned;

/// The largest start-up trace read: the S suite's are under 300 KiB.
pub const MAX_TRACE_BYTES: usize = 16 << 20;

/// Environment variable naming another folder of start-up traces.
pub const TRACES_ENV: &str = "ELEVATOR_TRACES";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStartup {
    name: Spanned<String>,
    trace: Spanned<String>,
    start: Option<Spanned<String>>,
    offset: Option<Spanned<String>>,
    think_scale: Option<Spanned<f64>>,
}

/// A validated `[[startup]]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct StartupSpec {
    pub name: String,
    pub line: usize,
    /// A trace name (`xterm`) or a path (`traces/app.trace`).
    pub trace: String,
    pub start: Duration,
    /// Byte offset of the first process's region.
    pub offset: u64,
    /// Factor on the trace's think times (1: as recorded).
    pub think_scale: f64,
}

/// The folder of the shared start-up traces: `$ELEVATOR_TRACES`, or
/// `../shared/traces/startup` beside the repository this was built from.
pub fn trace_dir() -> PathBuf {
    match std::env::var_os(TRACES_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/traces/startup"
        )),
    }
}

/// Where the trace `name_or_path` is read from: a name is looked up in
/// [`trace_dir`], anything with a `/` or ending in `.trace` is a path.
pub fn trace_path(name_or_path: &str) -> PathBuf {
    if name_or_path.contains('/') || name_or_path.ends_with(".trace") {
        PathBuf::from(name_or_path)
    } else {
        trace_dir().join(format!("{name_or_path}.trace"))
    }
}

/// Read and parse the trace a scenario names.
pub fn load_trace(name_or_path: &str) -> Result<StartupTrace, String> {
    let path = trace_path(name_or_path);
    let text = elevator_device::read_input(&path, MAX_TRACE_BYTES)
        .map_err(|e| format!("cannot read start-up trace {}: {e}", path.display()))?;
    StartupTrace::parse(&path.display().to_string(), &text).map_err(|e| e.to_string())
}

/// A factor on a trace's think times: finite, from 0 to 1000.
pub(crate) fn check_think_scale(f: f64) -> Result<f64, String> {
    if f.is_finite() && (0.0..=1000.0).contains(&f) {
        Ok(f)
    } else {
        Err(format!("{f}: a think-time factor is between 0 and 1000"))
    }
}

pub(crate) fn validate(
    cx: &Ctx<'_>,
    raw: &[RawStartup],
) -> Result<Vec<StartupSpec>, ScenarioError> {
    let at = |v: &Spanned<String>, key: &str, m: String| cx.at(v, key, m);
    let mut out = Vec::new();
    for s in raw {
        let name = s.name.get_ref();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(at(
                &s.name,
                "startup.name",
                "a start-up name is one word".into(),
            ));
        }
        if s.trace.get_ref().trim().is_empty() {
            return Err(at(
                &s.trace,
                "startup.trace",
                "name a trace or a file".into(),
            ));
        }
        let start = match &s.start {
            Some(v) => parse_duration(v.get_ref()).map_err(|m| at(v, "startup.start", m))?,
            None => Duration::ZERO,
        };
        let offset = match &s.offset {
            Some(v) => cx.sectors(v, "startup.offset")?,
            None => 0,
        };
        let think_scale = match &s.think_scale {
            Some(v) => {
                check_think_scale(*v.get_ref()).map_err(|m| cx.at(v, "startup.think_scale", m))?
            }
            None => 1.0,
        };
        out.push(StartupSpec {
            name: name.clone(),
            line: cx.line(s.name.span().start),
            trace: s.trace.get_ref().clone(),
            start,
            offset,
            think_scale,
        });
    }
    Ok(out)
}

/// The scenario's start-up replays, with tasks from `*task` on.
pub(crate) fn build(
    file: &str,
    specs: &[StartupSpec],
    limits: &QueueLimits,
    seed: u64,
    task: &mut u32,
) -> Result<Vec<StartupReplay>, ScenarioError> {
    let mut out = Vec::new();
    for s in specs {
        let err = |key: &str, m: String| ScenarioError::new(file, Some(s.line), Some(key), m);
        let trace = load_trace(&s.trace)
            .map_err(|m| err("startup.trace", m))?
            .with_think_scaled(s.think_scale);
        let mut replay = StartupReplay::new(&s.name, trace, *task, seed);
        replay.start = s.start;
        replay.region_start = s.offset / SECTOR_SIZE;
        let end = replay.region_start + replay.footprint_sectors();
        if end > limits.capacity {
            return Err(err(
                "startup.offset",
                format!(
                    "start-up {} reaches byte {}, past the end of the device ({} bytes)",
                    s.name,
                    end * SECTOR_SIZE,
                    limits.capacity * SECTOR_SIZE
                ),
            ));
        }
        *task += replay.tasks().len() as u32;
        out.push(replay);
    }
    Ok(out)
}
