//! Measurements and reports.
//!
//! Workloads record into [`JobStats`] as requests complete; a finished run
//! becomes a [`RunReport`] per policy, gathered in a [`Report`] that renders
//! as a comparison table, JSON (the stable schema documented in
//! `docs/report-schema.md`) or CSV.
//!
//! Invariant: reports are pure functions of the recorded numbers; rendering
//! never consults anything else, so equal runs print equal bytes.

mod calls;
pub mod fio;
mod latency;
mod report;
pub mod text;

pub use calls::{CallSamples, CallSummary};
pub use latency::LatencyStats;
pub use report::{DeviceReport, GroupReport, JobReport, Report, ResultValue, RunReport};

use elevator_core::{Duration, Instant};
use std::collections::BTreeMap;

/// What one job (or process) did during a run.
#[derive(Clone, Debug)]
pub struct JobStats {
    pub name: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub ios: u64,
    pub started: Option<Instant>,
    pub finished: Option<Instant>,
    /// Latency of each I/O (or syscall, for processes), submission to completion.
    pub latency: LatencyStats,
    /// Device time spent on this job's requests (see `Completion::disk_time`).
    pub disk_time: Duration,
    /// Job-specific figures (frames missed, start-up time, ...), printed as is.
    pub extra: BTreeMap<String, f64>,
    /// I/Os that failed (the device's EIO or timeout reached this job).
    pub errors: u64,
    /// Every timed system call's duration, by call (see [`CallSamples`]).
    pub calls: CallSamples,
    /// What the program printed, in its own layout (tiotest's tables,
    /// fsync-tester's `fsync time` lines), one line each.
    pub output: Vec<String>,
}

impl JobStats {
    pub fn new(name: impl Into<String>) -> Self {
        JobStats {
            name: name.into(),
            read_bytes: 0,
            write_bytes: 0,
            ios: 0,
            started: None,
            finished: None,
            latency: LatencyStats::new(),
            disk_time: Duration::ZERO,
            extra: BTreeMap::new(),
            errors: 0,
            calls: CallSamples::default(),
            output: Vec::new(),
        }
    }

    /// Record one completed I/O of `bytes` that took `latency`.
    pub fn record(&mut self, read: bool, bytes: u64, latency: Duration) {
        if read {
            self.read_bytes += bytes;
        } else {
            self.write_bytes += bytes;
        }
        self.ios += 1;
        self.latency.record(latency);
    }

    pub fn bytes(&self) -> u64 {
        self.read_bytes + self.write_bytes
    }

    /// The summary of this job at the end of a run that lasted until `end`.
    pub fn report(&self, end: Instant) -> JobReport {
        let start = self.started.unwrap_or(Instant::ZERO);
        let stop = self.finished.unwrap_or(end);
        let runtime = stop.since(start).as_secs_f64();
        let per_sec = |x: f64| if runtime > 0.0 { x / runtime } else { 0.0 };
        let lat = &self.latency;
        JobReport {
            name: self.name.clone(),
            bytes: self.bytes(),
            read_bytes: self.read_bytes,
            write_bytes: self.write_bytes,
            ios: self.ios,
            iops: per_sec(self.ios as f64),
            mb_s: per_sec(self.bytes() as f64 / 1e6),
            start_s: start.as_secs_f64(),
            completion_s: self.finished.map(|f| f.as_secs_f64()),
            runtime_s: runtime,
            disk_time_s: self.disk_time.as_secs_f64(),
            group: None,
            cut: false,
            lat_mean_ms: lat.mean().as_millis_f64(),
            lat_p50_ms: lat.quantile(0.50).as_millis_f64(),
            lat_p99_ms: lat.quantile(0.99).as_millis_f64(),
            lat_p999_ms: lat.quantile(0.999).as_millis_f64(),
            lat_max_ms: lat.max().as_millis_f64(),
            pct_over_2s: lat.percent_over(Duration::from_secs(2)),
            pct_over_10s: lat.percent_over(Duration::from_secs(10)),
            extra: self.extra.clone(),
            errors: self.errors,
            calls: self.calls.summaries(),
            output: self.output.clone(),
        }
    }
}
