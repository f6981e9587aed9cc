//! Trace replays and the what-if ranking: a user's block trace, replayed
//! on a device model under each policy (and tunable variant), ranked by
//! the metric the user cares about.
//!
//! Each run opens the trace anew and streams it (see
//! `elevator_workload::trace`), so runs are independent and can go in
//! parallel; results do not depend on how many threads ran them. Every
//! run uses the 2.6 block layer (`EngineConfig::linux_26`: 128 request
//! slots per direction).
//!
//! The metrics:
//! - `p99-read`: the 99th percentile of read latency (submission to
//!   completion), all processes together; lower is better;
//! - `mean`: mean latency of every request; lower is better;
//! - `throughput`: bytes moved over the time from the first submission
//!   to the last completion, MB/s; higher is better (in an open loop it
//!   is the trace's own rate unless the device cannot keep up);
//! - `slowdown`: the worst process's mean latency over the best mean that
//!   process had under any of the variants run; lower is better;
//! - `fairness`: Jain's index of the processes' slowdowns (1: every
//!   process slowed alike); higher is better.

use crate::ScenarioError;
use elevator_core::Instant;
use elevator_metrics::JobReport;
use elevator_sched::stack::{Origin, StackBuilder};
use elevator_sim::{Engine, EngineConfig};
use elevator_workload::trace::{open_trace, ReplayMode, ReplaySummary, TraceFormat, TraceReplay};
use std::fmt::Write as _;

/// What to replay, where, and how.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    pub trace: String,
    /// `None`: told from the trace's first line.
    pub format: Option<TraceFormat>,
    pub device: String,
    pub mode: ReplayMode,
}

/// A policy with tunable overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    pub policy: String,
    pub tunables: Vec<(String, i64)>,
}

impl Variant {
    pub fn new(policy: &str) -> Self {
        Variant {
            policy: policy.to_string(),
            tunables: Vec::new(),
        }
    }

    /// `deadline` or `deadline fifo_batch=1,read_expire=100`.
    pub fn label(&self) -> String {
        if self.tunables.is_empty() {
            return self.policy.clone();
        }
        let t: Vec<String> = self
            .tunables
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{} {}", self.policy, t.join(","))
    }
}

/// One replay's results.
#[derive(Clone, Debug)]
pub struct ReplayOutcome {
    pub variant: Variant,
    pub format: TraceFormat,
    pub device: String,
    pub processes: Vec<JobReport>,
    pub total: JobReport,
    /// p99 of read latency, ms (`None`: the trace has no reads).
    pub read_p99_ms: Option<f64>,
    pub summary: ReplaySummary,
    /// Simulated time at the end of the replay.
    pub end: Instant,
    /// Engine iterations.
    pub events: u64,
}

impl ReplayOutcome {
    /// MB/s from the first submission to the last completion.
    pub fn throughput_mb_s(&self) -> f64 {
        let span = self.end.as_secs_f64() - self.total.start_s;
        if span > 0.0 {
            self.total.bytes as f64 / 1e6 / span
        } else {
            0.0
        }
    }
}

fn trace_error(e: elevator_workload::TraceError) -> ScenarioError {
    ScenarioError {
        file: e.file,
        line: (e.line > 0).then_some(e.line),
        key: Some(e.field.to_string()),
        message: e.message,
    }
}

/// The stack of `variant`: its policy (named by `--sched`) and tunables.
fn stack(variant: &Variant) -> Result<StackBuilder, ScenarioError> {
    let mut builder = StackBuilder::new(&variant.policy, Origin::flag("--sched"))?;
    for (name, value) in &variant.tunables {
        let origin = Origin::flag(format!("--grid {}.{name}", builder.policy().name));
        builder = builder.tunable(name, *value, origin)?;
    }
    Ok(builder)
}

/// Check `variant` names a policy and valid tunables.
pub fn check_variant(variant: &Variant) -> Result<(), ScenarioError> {
    stack(variant).map(drop)
}

/// Replay the trace once under `variant`, on the 2.6 block layer.
pub fn replay(config: &ReplayConfig, variant: &Variant) -> Result<ReplayOutcome, ScenarioError> {
    let builder = stack(variant)?;
    let dev = elevator_device::open(&config.device).map_err(|e| {
        ScenarioError::command_line(None, format!("device {:?}: {e}", config.device))
    })?;
    let limits = dev.limits();
    let (mut engine, stack) = Engine::build(builder, dev, EngineConfig::linux_26());
    let reader = open_trace(&config.trace, config.format).map_err(trace_error)?;
    let format = reader.format();
    let mut replay = TraceReplay::new(reader, config.mode, limits.capacity, limits.max_sectors, 1);
    let run = engine.run(&mut replay);
    if let Some(e) = replay.error() {
        return Err(trace_error(e.clone()));
    }
    if replay.summary().records == 0 {
        return Err(ScenarioError::new(
            &config.trace,
            None,
            None,
            "no requests in the trace",
        ));
    }
    let processes = replay
        .process_stats()
        .iter()
        .map(|s| s.report(run.end))
        .collect();
    let reads = replay.read_latency();
    Ok(ReplayOutcome {
        variant: Variant {
            policy: stack.policy.name.to_string(),
            tunables: variant.tunables.clone(),
        },
        format,
        device: config.device.clone(),
        processes,
        total: replay.total().report(run.end),
        read_p99_ms: (reads.count() > 0).then(|| reads.quantile(0.99).as_millis_f64()),
        summary: replay.summary().clone(),
        end: run.end,
        events: run.events,
    })
}

/// What the what-if ranks by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    P99Read,
    Mean,
    Throughput,
    Slowdown,
    Fairness,
}

impl Metric {
    pub const ALL: [Metric; 5] = [
        Metric::P99Read,
        Metric::Mean,
        Metric::Throughput,
        Metric::Slowdown,
        Metric::Fairness,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::P99Read => "p99-read",
            Metric::Mean => "mean",
            Metric::Throughput => "throughput",
            Metric::Slowdown => "slowdown",
            Metric::Fairness => "fairness",
        }
    }

    pub fn from_name(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == s)
    }

    fn higher_is_better(self) -> bool {
        matches!(self, Metric::Throughput | Metric::Fairness)
    }
}

/// One row of the what-if table.
#[derive(Clone, Debug)]
pub struct Ranked {
    pub outcome: ReplayOutcome,
    /// Worst process's mean latency over its best mean under any variant.
    pub worst_slowdown: f64,
    /// Jain's index of the processes' slowdowns.
    pub fairness: f64,
}

impl Ranked {
    pub fn value(&self, metric: Metric) -> f64 {
        let o = &self.outcome;
        match metric {
            Metric::P99Read => o.read_p99_ms.unwrap_or(o.total.lat_p99_ms),
            Metric::Mean => o.total.lat_mean_ms,
            Metric::Throughput => o.throughput_mb_s(),
            Metric::Slowdown => self.worst_slowdown,
            Metric::Fairness => self.fairness,
        }
    }
}

/// Replay under every variant (on up to `threads` threads) and rank by
/// `metric`, best first; ties keep the variants' order. `progress` hears
/// of each finished run.
pub fn whatif(
    config: &ReplayConfig,
    variants: &[Variant],
    metric: Metric,
    threads: usize,
    progress: &(dyn Fn(&ReplayOutcome) + Sync),
) -> Result<Vec<Ranked>, ScenarioError> {
    for v in variants {
        check_variant(v)?;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<ReplayOutcome, ScenarioError>>>> = variants
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, variants.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(v) = variants.get(i) else { break };
                let r = replay(config, v);
                if let Ok(o) = &r {
                    progress(o);
                }
                *results[i].lock().expect("no panics while held") = Some(r);
            });
        }
    });
    let outcomes: Vec<ReplayOutcome> = results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .expect("no panics")
                .expect("every variant ran")
        })
        .collect::<Result<_, _>>()?;
    Ok(rank(outcomes, metric))
}

/// Slowdowns, fairness and the ranking of finished replays.
pub fn rank(outcomes: Vec<ReplayOutcome>, metric: Metric) -> Vec<Ranked> {
    // Each process's best mean latency under any variant.
    let n = outcomes
        .iter()
        .map(|o| o.processes.len())
        .max()
        .unwrap_or(0);
    let mut best = vec![f64::INFINITY; n];
    for o in &outcomes {
        for (i, p) in o.processes.iter().enumerate() {
            if p.ios > 0 {
                best[i] = best[i].min(p.lat_mean_ms);
            }
        }
    }
    let mut ranked: Vec<Ranked> = outcomes
        .into_iter()
        .map(|outcome| {
            let slowdowns: Vec<f64> = outcome
                .processes
                .iter()
                .enumerate()
                .filter(|(i, p)| p.ios > 0 && best[*i] > 0.0)
                .map(|(i, p)| p.lat_mean_ms / best[i])
                .collect();
            let worst = slowdowns.iter().copied().fold(1.0, f64::max);
            let sum: f64 = slowdowns.iter().sum();
            let squares: f64 = slowdowns.iter().map(|s| s * s).sum();
            let fairness = if squares > 0.0 {
                sum * sum / (slowdowns.len() as f64 * squares)
            } else {
                1.0
            };
            Ranked {
                outcome,
                worst_slowdown: worst,
                fairness,
            }
        })
        .collect();
    ranked.sort_by(|a, b| {
        let (x, y) = (a.value(metric), b.value(metric));
        if metric.higher_is_better() {
            y.total_cmp(&x)
        } else {
            x.total_cmp(&y)
        }
    });
    ranked
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The what-if table (fits 100 columns).
pub fn whatif_table(config: &ReplayConfig, ranked: &[Ranked], metric: Metric) -> String {
    let mut out = String::new();
    let Some(first) = ranked.first() else {
        return out;
    };
    let o = &first.outcome;
    let _ = writeln!(
        out,
        "{}\n{}: {} requests, {} processes, {:.1} s recorded\non {}, {}, ranked by {}",
        config.trace,
        o.format,
        o.summary.records,
        o.processes.len(),
        o.summary.trace_span.as_secs_f64(),
        config.device,
        config.mode.describe(),
        metric.name()
    );
    let width = ranked
        .iter()
        .map(|r| r.outcome.variant.label().len())
        .max()
        .unwrap_or(6)
        .clamp(6, 34);
    let _ = writeln!(
        out,
        "{:>2}  {:<width$} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "#", "policy", "p99 read", "mean", "MB/s", "slowdown", "fairness", "sim. s"
    );
    let _ = writeln!(
        out,
        "{:>2}  {:<width$} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "", "", "ms", "ms", "", "worst", "Jain", ""
    );
    for (i, r) in ranked.iter().enumerate() {
        let o = &r.outcome;
        let mut label = o.variant.label();
        label.truncate(width);
        let _ = writeln!(
            out,
            "{:>2}  {:<width$} {:>10} {:>9} {:>9.1} {:>9.2} {:>9.3} {:>9.2}",
            i + 1,
            label,
            o.read_p99_ms.map_or("-".to_string(), ms),
            ms(o.total.lat_mean_ms),
            o.throughput_mb_s(),
            r.worst_slowdown,
            r.fairness,
            o.end.as_secs_f64()
        );
    }
    out
}

/// The per-process and total report of one replay (fits 100 columns).
pub fn replay_table(config: &ReplayConfig, o: &ReplayOutcome) -> String {
    let mut out = String::new();
    let s = &o.summary;
    let _ = writeln!(
        out,
        "{}\n{}: {} requests, {} processes, {:.3} s recorded\n{} on {}, {}",
        config.trace,
        o.format,
        s.records,
        o.processes.len(),
        s.trace_span.as_secs_f64(),
        o.variant.label(),
        o.device,
        config.mode.describe()
    );
    let _ = writeln!(
        out,
        "{:<24} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "process", "ios", "MB", "mean ms", "p50 ms", "p99 ms", "max ms", "done s"
    );
    let row = |out: &mut String, name: &str, j: &JobReport| {
        let mut name = name.to_string();
        if name.chars().count() > 24 {
            name = name.chars().take(23).collect::<String>() + "…";
        }
        let _ = writeln!(
            out,
            "{:<24} {:>8} {:>9.1} {:>8} {:>8} {:>8} {:>9} {:>9.3}",
            name,
            j.ios,
            j.bytes as f64 / 1e6,
            ms(j.lat_mean_ms),
            ms(j.lat_p50_ms),
            ms(j.lat_p99_ms),
            ms(j.lat_max_ms),
            j.completion_s.unwrap_or(o.end.as_secs_f64())
        );
    };
    const SHOWN: usize = 40;
    let mut order: Vec<&JobReport> = o.processes.iter().collect();
    order.sort_by(|a, b| b.ios.cmp(&a.ios).then(a.name.cmp(&b.name)));
    for j in order.iter().take(SHOWN) {
        row(&mut out, &j.name, j);
    }
    if order.len() > SHOWN {
        let _ = writeln!(
            out,
            "({} more processes with fewer requests not shown)",
            order.len() - SHOWN
        );
    }
    row(&mut out, "total", &o.total);
    if let Some(p99) = o.read_p99_ms {
        let _ = writeln!(out, "reads: p99 {} ms", ms(p99));
    }
    let _ = writeln!(
        out,
        "throughput {:.1} MB/s; simulated {:.3} s",
        o.throughput_mb_s(),
        o.end.as_secs_f64()
    );
    if let ReplayMode::Open { .. } = config.mode {
        let mean = if s.records > 0 {
            s.total_drift.nanos() as f64 / s.records as f64 / 1e3
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "drift (submission after schedule): max {:.3} µs, mean {mean:.3} µs",
            s.max_drift.nanos() as f64 / 1e3
        );
    }
    if s.measured > 0 {
        let _ = writeln!(
            out,
            "the trace's own measured service/response time: mean {} ms over {} requests",
            ms(s.measured_service.as_millis_f64() / s.measured as f64),
            s.measured
        );
    }
    if s.errors > 0 {
        let _ = writeln!(out, "{} request pieces failed on the device", s.errors);
    }
    if s.wrapped > 0 || s.split > 0 {
        let _ = writeln!(
            out,
            "{} requests past the device's end wrapped onto it; {} split to the device's largest size",
            s.wrapped, s.split
        );
    }
    out
}
