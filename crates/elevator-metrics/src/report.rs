//! Run reports and their three renderings.
//!
//! The JSON form is a stable schema (see `docs/report-schema.md`): fields
//! are only ever added, never renamed or removed.

use crate::text::{columns, wrap, WIDTH};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The headline figure of a run, named by the scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResultValue {
    pub name: String,
    pub unit: String,
    /// `NaN` when the run gave none (serialised as `null`).
    pub value: f64,
    /// The value is a lower bound: a job it measures was cut by the time
    /// limit before it finished.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

impl ResultValue {
    /// The value as a table prints it: `> 30.000` for a cut job, `n/a`
    /// where there is none, never `NaN`.
    pub fn text(&self) -> String {
        if !self.value.is_finite() {
            "n/a".into()
        } else if self.cut {
            format!("> {:.3}", self.value)
        } else {
            format!("{:.3}", self.value)
        }
    }
}

/// Per-job summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobReport {
    pub name: String,
    pub bytes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub ios: u64,
    pub iops: f64,
    /// Decimal megabytes (10^6 bytes) per second, as vmstat-era tools print.
    pub mb_s: f64,
    pub start_s: f64,
    /// When the job finished, if it did (background loops do not).
    pub completion_s: Option<f64>,
    pub runtime_s: f64,
    /// Device time spent on this job's requests.
    pub disk_time_s: f64,
    /// The control group, when the scenario declares groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// A measured job the time limit cut before it finished: its
    /// completion is unknown (after the run's end), not the end.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    pub lat_mean_ms: f64,
    pub lat_p50_ms: f64,
    pub lat_p99_ms: f64,
    pub lat_p999_ms: f64,
    pub lat_max_ms: f64,
    pub pct_over_2s: f64,
    pub pct_over_10s: f64,
    /// Job-specific figures (frames missed, start-up time, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
    /// I/Os that failed (injected device faults).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub errors: u64,
    /// Per-call samples of the timed system calls, by call.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub calls: BTreeMap<String, crate::CallSummary>,
    /// The program's own printed output, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What one control group's jobs did together.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupReport {
    pub name: String,
    pub weight: u32,
    /// `io.max` as written in cgroup v2 (`rbps=... wbps=... riops=... wiops=...`).
    pub io_max: String,
    pub tasks: usize,
    pub bytes: u64,
    pub mb_s: f64,
    pub iops: f64,
    pub lat_mean_ms: f64,
    pub lat_max_ms: f64,
    pub disk_time_s: f64,
    /// This group's share of all jobs' device time.
    pub disk_share: f64,
}

/// What the device did during a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceReport {
    pub busy_s: f64,
    pub utilization: f64,
    pub requests: u64,
    pub seeks: u64,
    pub seek_distance_sectors: u64,
}

/// One policy's run of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    pub scheduler: String,
    /// Which point of a sweep this run is (`random.count=4`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    pub tunables: BTreeMap<String, i64>,
    /// The block layer's settings in force (`nr_requests`, ...), as text.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub block: BTreeMap<String, String>,
    pub result: ResultValue,
    /// The published figure for this policy, if the scenario cites one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
    pub simulated_s: f64,
    pub aggregate_mb_s: f64,
    pub device: DeviceReport,
    /// Per control group, when the scenario declares groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupReport>,
    pub jobs: Vec<JobReport>,
    /// The engine's decision trace, when asked for (`--trace`).
    #[serde(skip)]
    pub trace: Option<String>,
}

/// A scenario run under one or more policies.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub device: String,
    pub seed: u64,
    pub runs: Vec<RunReport>,
    /// The table's per-job section shows KiB read and written (the layout
    /// of Brunelle's 2009 priority tables); not part of the JSON.
    #[serde(skip)]
    pub per_job_kib: bool,
    /// The table's per-group section has one row per run with each
    /// group's MB/s and IOPS side by side (the layout of the 2009 group
    /// controller tables); not part of the JSON.
    #[serde(skip)]
    pub per_group_wide: bool,
}

impl RunReport {
    /// The policy, and the sweep point if any.
    pub fn label(&self) -> String {
        match &self.variant {
            Some(v) => format!("{} {v}", self.scheduler),
            None => self.scheduler.clone(),
        }
    }
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serialises") + "\n"
    }

    /// Every run's decision trace, each after a `# policy NAME` line.
    pub fn trace_text(&self) -> String {
        let mut out = String::new();
        for run in &self.runs {
            let _ = writeln!(out, "# policy {}", run.label());
            out.push_str(run.trace.as_deref().unwrap_or("# (not recorded)\n"));
        }
        out
    }

    /// One row per (policy, job).
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "scenario,device,seed,scheduler,result_name,result_unit,result_value,job,bytes,ios,iops,mb_s,start_s,completion_s,lat_mean_ms,lat_p50_ms,lat_p99_ms,lat_p999_ms,lat_max_ms,pct_over_2s,pct_over_10s,variant,group,disk_time_s\n",
        );
        for run in &self.runs {
            for j in &run.jobs {
                let completion = j
                    .completion_s
                    .map(|c| format!("{c:.6}"))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{:.6},{},{},{},{:.3},{:.3},{:.6},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{:.6}",
                    csv(&self.scenario),
                    csv(&self.device),
                    self.seed,
                    csv(&run.scheduler),
                    csv(&run.result.name),
                    csv(&run.result.unit),
                    run.result.value,
                    csv(&j.name),
                    j.bytes,
                    j.ios,
                    j.iops,
                    j.mb_s,
                    j.start_s,
                    completion,
                    j.lat_mean_ms,
                    j.lat_p50_ms,
                    j.lat_p99_ms,
                    j.lat_p999_ms,
                    j.lat_max_ms,
                    j.pct_over_2s,
                    j.pct_over_10s,
                    csv(run.variant.as_deref().unwrap_or("")),
                    csv(j.group.as_deref().unwrap_or("")),
                    j.disk_time_s
                );
            }
        }
        out
    }

    /// The comparison table, within [`WIDTH`] columns: the headline result
    /// per policy first, then per group, then one block of per-job figures
    /// per run (job-specific figures on their own lines), then the
    /// settings in force. A job cut by the time limit shows `> END`; a
    /// missing figure shows `n/a`, never `NaN`.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}",
            wrap(
                &format!("{}: {}", self.scenario, self.description),
                WIDTH,
                "scenario  "
            )
        );
        let _ = writeln!(out, "device    {}    seed {}", self.device, self.seed);
        let Some(first) = self.runs.first() else {
            return out;
        };
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{}",
            wrap(
                &format!("{} ({})", first.result.name, first.result.unit),
                WIDTH,
                ""
            )
        );
        let mut rows = vec![vec![
            "scheduler".to_string(),
            "result".to_string(),
            "aggregate MB/s".to_string(),
            "simulated s".to_string(),
            "disk busy".to_string(),
            "seeks".to_string(),
            "published".to_string(),
        ]];
        for run in &self.runs {
            rows.push(vec![
                run.label(),
                run.result.text(),
                format!("{:.1}", run.aggregate_mb_s),
                format!("{:.2}", run.simulated_s),
                format!("{:.0}%", run.device.utilization * 100.0),
                run.device.seeks.to_string(),
                run.published.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        columns(&mut out, &rows);

        if self.per_group_wide && self.runs.iter().any(|r| !r.groups.is_empty()) {
            let _ = writeln!(out);
            let _ = writeln!(out, "per group, MB/s and IOPS");
            let mut header = vec!["run".to_string()];
            for g in &first.groups {
                header.push(format!("{} tasks", g.name));
                header.push(format!("{} MB/s", g.name));
                header.push(format!("{} IOPS", g.name));
            }
            let mut rows = vec![header];
            for run in &self.runs {
                let mut row = vec![run.label()];
                for g in &run.groups {
                    row.push(g.tasks.to_string());
                    row.push(format!("{:.2}", g.mb_s));
                    row.push(format!("{:.0}", g.iops));
                }
                rows.push(row);
            }
            columns(&mut out, &rows);
        } else if self.runs.iter().any(|r| !r.groups.is_empty()) {
            let _ = writeln!(out);
            let _ = writeln!(out, "per group");
            let mut rows = vec![[
                "run",
                "group",
                "tasks",
                "MB/s",
                "IOPS",
                "lat mean ms",
                "lat max ms",
                "disk share",
            ]
            .map(String::from)
            .to_vec()];
            for run in &self.runs {
                for g in &run.groups {
                    rows.push(vec![
                        run.label(),
                        g.name.clone(),
                        g.tasks.to_string(),
                        format!("{:.1}", g.mb_s),
                        format!("{:.0}", g.iops),
                        format!("{:.1}", g.lat_mean_ms),
                        format!("{:.1}", g.lat_max_ms),
                        format!("{:.0}%", g.disk_share * 100.0),
                    ]);
                }
            }
            columns(&mut out, &rows);
        }

        // Past a handful of runs the blocks stop being readable; say so.
        if self.runs.len() > MAX_JOB_BLOCKS {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "per job: {} runs, more than {MAX_JOB_BLOCKS}; see --format json or csv",
                self.runs.len()
            );
        } else {
            for run in &self.runs {
                let _ = writeln!(out);
                let _ = writeln!(out, "per job, {}", run.label());
                let mut rows = vec![[
                    "job",
                    "finished s",
                    "MB/s",
                    "lat mean ms",
                    "p99 ms",
                    "max ms",
                    "% > 2 s",
                ]
                .map(String::from)
                .to_vec()];
                let mut extras = Vec::new();
                if self.per_job_kib {
                    // Brunelle's layout: KiB read and written per process.
                    rows = vec![["job", "KiB read", "KiB written"]
                        .map(String::from)
                        .to_vec()];
                    for j in &run.jobs {
                        rows.push(vec![
                            j.name.clone(),
                            (j.read_bytes / 1024).to_string(),
                            (j.write_bytes / 1024).to_string(),
                        ]);
                    }
                    columns(&mut out, &rows);
                    continue;
                }
                for j in &run.jobs {
                    let done = match j.completion_s {
                        Some(c) => format!("{c:.2}"),
                        None if j.cut => format!("> {:.2}", run.simulated_s),
                        None => "-".into(),
                    };
                    rows.push(vec![
                        j.name.clone(),
                        done,
                        format!("{:.1}", j.mb_s),
                        format!("{:.1}", j.lat_mean_ms),
                        format!("{:.1}", j.lat_p99_ms),
                        format!("{:.1}", j.lat_max_ms),
                        format!("{:.1}", j.pct_over_2s),
                    ]);
                    if !j.extra.is_empty() {
                        let figures: Vec<String> = j
                            .extra
                            .iter()
                            .map(|(k, v)| format!("{k} {}", figure(*v)))
                            .collect();
                        extras.push(wrap(&figures.join(", "), WIDTH, &format!("  {}: ", j.name)));
                    }
                }
                columns(&mut out, &rows);
                for e in extras {
                    let _ = writeln!(out, "{e}");
                }
                calls_and_output(&mut out, run);
            }
        }

        let _ = writeln!(out);
        let _ = writeln!(out, "settings in force");
        let mut shown: Vec<(String, Vec<String>)> = Vec::new();
        for run in &self.runs {
            if !shown.iter().any(|(p, _)| *p == run.scheduler) {
                let t: Vec<String> = run
                    .tunables
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let t = if t.is_empty() {
                    "(no tunables)".to_string()
                } else {
                    t.join(" ")
                };
                let _ = writeln!(
                    out,
                    "{}",
                    wrap(&t, WIDTH, &format!("  {}: ", run.scheduler))
                );
                shown.push((run.scheduler.clone(), Vec::new()));
            }
        }
        // Block settings, once per distinct set, naming the runs that had it.
        let mut blocks: Vec<(String, Vec<String>)> = Vec::new();
        for run in &self.runs {
            let b: Vec<String> = run.block.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let b = b.join(" ");
            match blocks.iter_mut().find(|(s, _)| *s == b) {
                Some((_, who)) => {
                    if !who.contains(&run.scheduler) {
                        who.push(run.scheduler.clone());
                    }
                }
                None => blocks.push((b, vec![run.scheduler.clone()])),
            }
        }
        for (b, who) in blocks.iter().filter(|(b, _)| !b.is_empty()) {
            let prefix = if blocks.len() == 1 {
                "  block: ".to_string()
            } else {
                format!("  block ({}): ", who.join(", "))
            };
            let _ = writeln!(out, "{}", wrap(b, WIDTH, &prefix));
        }
        out
    }
}

/// Runs past which the table leaves the per-job blocks to JSON and CSV.
const MAX_JOB_BLOCKS: usize = 6;

/// A job-specific figure: integers as such, others to four significant
/// places, `n/a` for a non-number.
fn figure(v: f64) -> String {
    if !v.is_finite() {
        "n/a".into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The per-call samples of every job that timed its calls, then each job's
/// own printed output as the tool laid it out.
fn calls_and_output(out: &mut String, run: &RunReport) {
    let mut rows = vec![["job", "call", "count", "median ms", "p90 ms", "max ms"]
        .map(String::from)
        .to_vec()];
    for j in &run.jobs {
        for (call, c) in &j.calls {
            rows.push(vec![
                j.name.clone(),
                call.clone(),
                c.count.to_string(),
                // Buffered calls take microseconds, fsyncs seconds.
                format!("{:.3}", c.median_ms),
                format!("{:.3}", c.p90_ms),
                format!("{:.3}", c.max_ms),
            ]);
        }
    }
    if rows.len() > 1 {
        let _ = writeln!(out);
        let _ = writeln!(out, "per-call samples, {}", run.label());
        columns(out, &rows);
    }
    for j in run.jobs.iter().filter(|j| !j.output.is_empty()) {
        let _ = writeln!(out);
        let _ = writeln!(out, "{} as the tool prints it, {}", j.name, run.label());
        for line in &j.output {
            let _ = writeln!(out, "{line}");
        }
    }
}
