//! The headline result a scenario names, and how it is computed from the
//! jobs' statistics.

use elevator_core::Instant;
use elevator_metrics::{GroupReport, JobReport};
use std::str::FromStr;

/// A per-job figure, or a whole-run one.
#[derive(Clone, Debug, PartialEq)]
pub enum Metric {
    /// Seconds from a job's start to its end (`time cat file`).
    Completion,
    /// Seconds from the start of the run to a job's end.
    FinishTime,
    MbS,
    Iops,
    LatMeanMs,
    LatP99Ms,
    LatMaxMs,
    PctOver2s,
    /// A group's share of the jobs' device time (with `group`).
    DiskShare,
    /// Bytes of every job over the simulated time, in MB/s.
    AggregateMbS,
    /// Simulated seconds until the run ended.
    SimulatedS,
    /// A job-specific figure (`extra:frames_missed`).
    Extra(String),
    /// Bytes the job read (or the group moved, for `bytes`).
    ReadBytes,
    WriteBytes,
    Bytes,
    /// A statistic of a timed system call's samples (`call:fsync:median`).
    Call {
        call: String,
        stat: CallStat,
    },
}

/// Which statistic of a call's samples (`JobReport::calls`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallStat {
    Count,
    Min,
    Median,
    P90,
    Max,
}

impl CallStat {
    pub const NAMES: [&'static str; 5] = ["count", "min", "median", "p90", "max"];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    fn parse(s: &str) -> Option<CallStat> {
        Some(match s {
            "count" => CallStat::Count,
            "min" => CallStat::Min,
            "median" => CallStat::Median,
            "p90" => CallStat::P90,
            "max" => CallStat::Max,
            _ => return None,
        })
    }

    /// This statistic of `samples` (any unit), nearest-rank as
    /// [`elevator_metrics::CallSamples::summary`] ranks ours, so that a
    /// published list and our samples are summed up alike; `None` for
    /// no samples.
    pub fn of(self, samples: &[f64]) -> Option<f64> {
        let mut sorted: Vec<f64> = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let rank = |q: f64| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        (n > 0).then(|| match self {
            CallStat::Count => n as f64,
            CallStat::Min => sorted[0],
            CallStat::Median => rank(0.5),
            CallStat::P90 => rank(0.9),
            CallStat::Max => sorted[n - 1],
        })
    }

    fn of_summary(self, c: &elevator_metrics::CallSummary) -> f64 {
        match self {
            CallStat::Count => c.count as f64,
            CallStat::Min => c.min_ms,
            CallStat::Median => c.median_ms,
            CallStat::P90 => c.p90_ms,
            CallStat::Max => c.max_ms,
        }
    }
}

impl Metric {
    /// The unit our figure comes in (`units::Unit` names); `None` for a
    /// job-specific extra, whose unit its program documents.
    pub fn native_unit(&self) -> Option<&'static str> {
        Some(match self {
            Metric::Completion | Metric::FinishTime | Metric::SimulatedS => "s",
            Metric::MbS | Metric::AggregateMbS => "MB/s",
            Metric::Iops => "IOPS",
            Metric::LatMeanMs | Metric::LatP99Ms | Metric::LatMaxMs => "ms",
            Metric::PctOver2s => "%",
            Metric::DiskShare => "fraction",
            Metric::ReadBytes | Metric::WriteBytes | Metric::Bytes => "B",
            Metric::Call {
                stat: CallStat::Count,
                ..
            } => "calls",
            Metric::Call { .. } => "ms",
            Metric::Extra(_) => return None,
        })
    }
}

impl FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "completion" => Metric::Completion,
            "finish_time" => Metric::FinishTime,
            "mb_s" => Metric::MbS,
            "iops" => Metric::Iops,
            "lat_mean_ms" => Metric::LatMeanMs,
            "lat_p99_ms" => Metric::LatP99Ms,
            "lat_max_ms" => Metric::LatMaxMs,
            "pct_over_2s" => Metric::PctOver2s,
            "disk_share" => Metric::DiskShare,
            "aggregate_mb_s" => Metric::AggregateMbS,
            "simulated_s" => Metric::SimulatedS,
            "read_bytes" => Metric::ReadBytes,
            "write_bytes" => Metric::WriteBytes,
            "bytes" => Metric::Bytes,
            other => match (other.strip_prefix("extra:"), other.strip_prefix("call:")) {
                (Some(k), _) if !k.is_empty() => Metric::Extra(k.to_string()),
                (_, Some(c)) => {
                    let bad = || {
                        format!(
                            "{other:?}: a call's statistic is call:CALL:STAT, STAT one of {}",
                            CallStat::NAMES.join(", ")
                        )
                    };
                    let (call, stat) = c.rsplit_once(':').ok_or_else(bad)?;
                    let stat = CallStat::parse(stat).ok_or_else(bad)?;
                    if call.is_empty() {
                        return Err(bad());
                    }
                    Metric::Call {
                        call: call.to_string(),
                        stat,
                    }
                }
                _ => return Err(format!(
                    "unknown metric {other:?} (completion, finish_time, mb_s, iops, lat_mean_ms, lat_p99_ms, lat_max_ms, pct_over_2s, disk_share, aggregate_mb_s, simulated_s, read_bytes, write_bytes, bytes, extra:NAME, call:CALL:STAT)"
                )),
            },
        })
    }
}

/// How the selected jobs' figures become one number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    Max,
    Min,
    Mean,
    Sum,
}

impl FromStr for Reduce {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "max" => Reduce::Max,
            "min" => Reduce::Min,
            "mean" => Reduce::Mean,
            "sum" => Reduce::Sum,
            other => return Err(format!("unknown reduce {other:?} (max, min, mean, sum)")),
        })
    }
}

/// What the scenario reports first.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultSpec {
    pub name: String,
    pub unit: String,
    pub metric: Metric,
    /// Jobs named this, or `this.N`; `None`: every measured job.
    pub job: Option<String>,
    /// Or: this control group's aggregate figures.
    pub group: Option<String>,
    pub reduce: Reduce,
}

impl ResultSpec {
    pub(crate) fn parse(r: &RawResultChecked, jobs: &[String]) -> Result<ResultSpec, String> {
        if let Some(j) = &r.job {
            if !jobs.iter().any(|t| t == j) {
                return Err(format!(
                    "result.job names no job or process: {j:?} (known: {})",
                    jobs.join(", ")
                ));
            }
        }
        let default = match r.metric {
            Metric::MbS | Metric::Iops | Metric::ReadBytes | Metric::WriteBytes | Metric::Bytes => {
                Reduce::Sum
            }
            _ => Reduce::Max,
        };
        Ok(ResultSpec {
            name: r.name.clone(),
            unit: r.unit.clone(),
            metric: r.metric.clone(),
            job: r.job.clone(),
            group: r.group.clone(),
            reduce: r.reduce.unwrap_or(default),
        })
    }

    /// Whether the report row `name` belongs to the selected jobs.
    pub fn selects(&self, name: &str) -> bool {
        match &self.job {
            None => true,
            Some(j) => {
                name == j
                    || name
                        .strip_prefix(j.as_str())
                        .is_some_and(|r| r.starts_with('.'))
            }
        }
    }

    /// Whether the headline value is only a lower bound: it is a job's
    /// completion and a selected job had not finished when the run ended.
    pub fn cut(&self, jobs: &[JobReport], measured: &[bool]) -> bool {
        self.group.is_none()
            && matches!(self.metric, Metric::Completion | Metric::FinishTime)
            && jobs
                .iter()
                .zip(measured)
                .filter(|(j, m)| self.selects(&j.name) && (self.job.is_some() || **m))
                .any(|(j, _)| j.completion_s.is_none())
    }

    /// The headline value of a run.
    pub fn evaluate(
        &self,
        jobs: &[JobReport],
        measured: &[bool],
        groups: &[GroupReport],
        end: Instant,
    ) -> f64 {
        if let Some(name) = &self.group {
            let Some(g) = groups.iter().find(|g| &g.name == name) else {
                return f64::NAN;
            };
            return match self.metric {
                Metric::MbS => g.mb_s,
                Metric::Iops => g.iops,
                Metric::LatMeanMs => g.lat_mean_ms,
                Metric::LatMaxMs => g.lat_max_ms,
                Metric::DiskShare => g.disk_share,
                Metric::Bytes => g.bytes as f64,
                _ => f64::NAN,
            };
        }
        let total_bytes: u64 = jobs.iter().map(|j| j.bytes).sum();
        let end_s = end.as_secs_f64();
        match &self.metric {
            Metric::AggregateMbS => {
                return if end_s > 0.0 {
                    total_bytes as f64 / 1e6 / end_s
                } else {
                    0.0
                }
            }
            Metric::SimulatedS => return end_s,
            _ => {}
        }
        let values: Vec<f64> = jobs
            .iter()
            .zip(measured)
            .filter(|(j, m)| self.selects(&j.name) && (self.job.is_some() || **m))
            .filter_map(|(j, _)| match &self.metric {
                Metric::Completion => Some(j.completion_s.unwrap_or(end_s) - j.start_s),
                Metric::FinishTime => Some(j.completion_s.unwrap_or(end_s)),
                Metric::MbS => Some(j.mb_s),
                Metric::Iops => Some(j.iops),
                Metric::LatMeanMs => Some(j.lat_mean_ms),
                Metric::LatP99Ms => Some(j.lat_p99_ms),
                Metric::LatMaxMs => Some(j.lat_max_ms),
                Metric::PctOver2s => Some(j.pct_over_2s),
                Metric::Extra(k) => j.extra.get(k).copied(),
                Metric::ReadBytes => Some(j.read_bytes as f64),
                Metric::WriteBytes => Some(j.write_bytes as f64),
                Metric::Bytes => Some(j.bytes as f64),
                Metric::Call { call, stat } => j.calls.get(call).map(|c| stat.of_summary(c)),
                Metric::AggregateMbS | Metric::SimulatedS | Metric::DiskShare => None,
            })
            .collect();
        if values.is_empty() {
            return f64::NAN;
        }
        match self.reduce {
            Reduce::Max => values.iter().copied().fold(f64::MIN, f64::max),
            Reduce::Min => values.iter().copied().fold(f64::MAX, f64::min),
            Reduce::Sum => values.iter().sum(),
            Reduce::Mean => values.iter().sum::<f64>() / values.len() as f64,
        }
    }
}

/// The result section with its strings checked.
pub(crate) struct RawResultChecked {
    pub name: String,
    pub unit: String,
    pub metric: Metric,
    pub job: Option<String>,
    pub group: Option<String>,
    pub reduce: Option<Reduce>,
}
