//! Run reports and their three renderings.
//!
//! The JSON form is a stable schema (see `docs/report-schema.md`): fields
//! are only ever added, never renamed or removed.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The headline figure of a run, named by the scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResultValue {
    pub name: String,
    pub unit: String,
    pub value: f64,
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

    /// The comparison table: the headline result per policy first, then
    /// per-job figures.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "scenario  {}: {}", self.scenario, self.description);
        let _ = writeln!(out, "device    {}    seed {}", self.device, self.seed);
        let Some(first) = self.runs.first() else {
            return out;
        };
        let _ = writeln!(out);
        let _ = writeln!(out, "{} ({})", first.result.name, first.result.unit);
        let mut rows = vec![vec![
            "scheduler".to_string(),
            "result".to_string(),
            "published".to_string(),
            "aggregate MB/s".to_string(),
            "simulated s".to_string(),
            "disk busy".to_string(),
            "seeks".to_string(),
        ]];
        for run in &self.runs {
            rows.push(vec![
                run.label(),
                format!("{:.3}", run.result.value),
                run.published.clone().unwrap_or_else(|| "-".into()),
                format!("{:.1}", run.aggregate_mb_s),
                format!("{:.2}", run.simulated_s),
                format!("{:.0}%", run.device.utilization * 100.0),
                run.device.seeks.to_string(),
            ]);
        }
        render(&mut out, &rows);

        if self.runs.iter().any(|r| !r.groups.is_empty()) {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "per group: tasks | MB/s | IOPS | latency mean / max ms | disk time share"
            );
            let names: Vec<&str> = first.groups.iter().map(|g| g.name.as_str()).collect();
            let mut rows = vec![std::iter::once("run".to_string())
                .chain(names.iter().map(|n| n.to_string()))
                .collect::<Vec<_>>()];
            for run in &self.runs {
                let mut row = vec![run.label()];
                for name in &names {
                    row.push(match run.groups.iter().find(|g| g.name == *name) {
                        Some(g) => format!(
                            "{} | {:.1} | {:.0} | {:.1} / {:.1} | {:.0}%",
                            g.tasks,
                            g.mb_s,
                            g.iops,
                            g.lat_mean_ms,
                            g.lat_max_ms,
                            g.disk_share * 100.0
                        ),
                        None => "-".into(),
                    });
                }
                rows.push(row);
            }
            render(&mut out, &rows);
        }

        // One column per run: past a handful of runs the per-job table
        // stops being readable; the JSON has it all.
        if self.runs.len() > 6 {
            return out;
        }
        let _ = writeln!(out);
        if self.per_job_kib {
            let _ = writeln!(out, "per process: KiB read | KiB written");
        } else {
            let _ = writeln!(
                out,
                "per job: finished at s | MB/s | latency mean / p99 / max ms | % > 2 s"
            );
        }
        let mut rows = vec![std::iter::once("job".to_string())
            .chain(self.runs.iter().map(RunReport::label))
            .collect::<Vec<_>>()];
        let mut names: Vec<&str> = Vec::new();
        for run in &self.runs {
            for j in &run.jobs {
                if !names.contains(&j.name.as_str()) {
                    names.push(&j.name);
                }
            }
        }
        for name in names {
            let mut row = vec![name.to_string()];
            for run in &self.runs {
                let cell = match run.jobs.iter().find(|j| j.name == name) {
                    Some(j) if self.per_job_kib => {
                        format!("{} | {}", j.read_bytes / 1024, j.write_bytes / 1024)
                    }
                    Some(j) => {
                        let done = j
                            .completion_s
                            .map(|c| format!("{c:.2}"))
                            .unwrap_or_else(|| "-".into());
                        let mut cell = format!(
                            "{done} | {:.1} | {:.1} / {:.1} / {:.1} | {:.1}",
                            j.mb_s, j.lat_mean_ms, j.lat_p99_ms, j.lat_max_ms, j.pct_over_2s
                        );
                        for (k, v) in &j.extra {
                            let _ = write!(cell, " | {k} {v}");
                        }
                        cell
                    }
                    None => "-".into(),
                };
                row.push(cell);
            }
            rows.push(row);
        }
        render(&mut out, &rows);
        out
    }
}

fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Left-aligned columns separated by two spaces.
fn render(out: &mut String, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            line.push_str(cell);
            if c + 1 < row.len() {
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        let _ = writeln!(out, "  {}", line.trim_end());
    }
}
