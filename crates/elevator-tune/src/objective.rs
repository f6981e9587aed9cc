//! What "best" means: an objective over a run's per-job figures.
//!
//! Grammar (case-insensitive, spaces free):
//!
//! ```text
//! objective  := goal [ "," goal ] [ "subject to" constraint { "and" constraint } ]
//!             | "weights shares within" PCT [ "," goal ]
//! goal       := ("minimize" | "maximize") metric
//! metric     := NAME [ "(" JOB ")" ]       NAME: p50 p99 p999 mean max (ms), mb_s, iops
//! constraint := metric ("<" | "<=" | ">" | ">=") NUMBER [ms | us | s | MB/s | IOPS]
//! ```
//!
//! A metric without a job covers every job: latencies take the worst
//! job's, rates the sum over the run. `JOB` names a job (scenario job,
//! fio section, host process or trace process) or the stem of its
//! instances (`reader` for `reader.0`, `reader.1`: the worst, or the sum).
//! `weights shares within 10%` holds when every control group's share of
//! device time is within 10 % (relative) of its weight's share; with no
//! goal given it maximizes `mb_s` under that constraint. Two goals make a
//! two-metric objective: the search reports its Pareto front and ranks
//! by the first goal.

use std::fmt;

/// One job's figures from a simulated or measured run.
#[derive(Clone, Debug, PartialEq)]
pub struct JobFigures {
    pub name: String,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    pub mb_s: f64,
    pub iops: f64,
}

/// A control group's weight and its share of device time.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupShare {
    pub name: String,
    pub weight: u32,
    pub share: f64,
}

/// What an objective reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    pub jobs: Vec<JobFigures>,
    /// Bytes of every job over the run's span, MB/s.
    pub total_mb_s: f64,
    pub total_iops: f64,
    pub groups: Vec<GroupShare>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricName {
    P50,
    P99,
    P999,
    Mean,
    Max,
    MbS,
    Iops,
}

impl MetricName {
    const ALL: [(&'static str, MetricName); 7] = [
        ("p50", MetricName::P50),
        ("p99", MetricName::P99),
        ("p999", MetricName::P999),
        ("mean", MetricName::Mean),
        ("max", MetricName::Max),
        ("mb_s", MetricName::MbS),
        ("iops", MetricName::Iops),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |p| p.0)
    }

    fn is_latency(self) -> bool {
        !matches!(self, MetricName::MbS | MetricName::Iops)
    }

    /// The unit figures are printed in.
    pub fn unit(self) -> &'static str {
        match self {
            MetricName::MbS => "MB/s",
            MetricName::Iops => "IOPS",
            _ => "ms",
        }
    }
}

/// A metric, optionally of one job.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub name: MetricName,
    pub job: Option<String>,
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.job {
            Some(j) => write!(f, "{}({j})", self.name.name()),
            None => write!(f, "{}", self.name.name()),
        }
    }
}

/// Whether `job` is `pattern` or one of its instances.
fn matches(job: &str, pattern: &str) -> bool {
    job == pattern
        || job
            .strip_prefix(pattern)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('#'))
}

impl Metric {
    /// The metric's value on `f`, or why it has none.
    pub fn value(&self, f: &Figures) -> Result<f64, String> {
        let jobs: Vec<&JobFigures> = match &self.job {
            None => f.jobs.iter().collect(),
            Some(p) => f.jobs.iter().filter(|j| matches(&j.name, p)).collect(),
        };
        if jobs.is_empty() {
            let known: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
            return Err(format!(
                "no job {:?} in the run (jobs: {})",
                self.job.as_deref().unwrap_or("*"),
                known.join(", ")
            ));
        }
        let worst = |g: fn(&JobFigures) -> f64| jobs.iter().map(|j| g(j)).fold(0.0, f64::max);
        Ok(match (self.name, &self.job) {
            (MetricName::P50, _) => worst(|j| j.p50_ms),
            (MetricName::P99, _) => worst(|j| j.p99_ms),
            (MetricName::P999, _) => worst(|j| j.p999_ms),
            (MetricName::Mean, _) => worst(|j| j.mean_ms),
            (MetricName::Max, _) => worst(|j| j.max_ms),
            (MetricName::MbS, None) => f.total_mb_s,
            (MetricName::Iops, None) => f.total_iops,
            (MetricName::MbS, Some(_)) => jobs.iter().map(|j| j.mb_s).sum(),
            (MetricName::Iops, Some(_)) => jobs.iter().map(|j| j.iops).sum(),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Minimize,
    Maximize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    pub direction: Direction,
    pub metric: Metric,
}

impl Goal {
    /// The value as a cost (lower is better).
    pub fn cost(&self, f: &Figures) -> Result<f64, String> {
        let v = self.metric.value(f)?;
        Ok(match self.direction {
            Direction::Minimize => v,
            Direction::Maximize => -v,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Constraint {
    /// `metric op bound` (bound in the metric's unit).
    Bound {
        metric: Metric,
        op: Compare,
        bound: f64,
    },
    /// Every group's share of device time within `tolerance` (relative)
    /// of its weight's share.
    Shares { tolerance: f64 },
}

impl Constraint {
    /// How far the run is from meeting it (0: met), relative.
    pub fn violation(&self, f: &Figures) -> Result<f64, String> {
        match self {
            Constraint::Bound { metric, op, bound } => {
                let v = metric.value(f)?;
                let ok = match op {
                    Compare::Lt => v < *bound,
                    Compare::Le => v <= *bound,
                    Compare::Gt => v > *bound,
                    Compare::Ge => v >= *bound,
                };
                Ok(if ok {
                    0.0
                } else {
                    (v - bound).abs() / bound.abs().max(1e-9)
                })
            }
            Constraint::Shares { tolerance } => {
                let total: f64 = f.groups.iter().map(|g| f64::from(g.weight)).sum();
                if f.groups.len() < 2 || total <= 0.0 {
                    return Err(
                        "`weights shares` needs a workload with two or more weighted \
                                control groups"
                            .into(),
                    );
                }
                Ok(f.groups
                    .iter()
                    .map(|g| {
                        let want = f64::from(g.weight) / total;
                        ((g.share - want).abs() / want - tolerance).max(0.0)
                    })
                    .fold(0.0, f64::max))
            }
        }
    }
}

/// A parsed objective.
#[derive(Clone, Debug, PartialEq)]
pub struct Objective {
    pub text: String,
    /// One or two goals.
    pub goals: Vec<Goal>,
    pub constraints: Vec<Constraint>,
}

/// How one run scored.
#[derive(Clone, Debug, PartialEq)]
pub struct Score {
    /// Each goal's value in its unit (as printed).
    pub values: Vec<f64>,
    /// Each goal as a cost (lower is better).
    pub costs: Vec<f64>,
    /// Sum of the constraints' violations (0: feasible).
    pub violation: f64,
}

impl Score {
    pub fn feasible(&self) -> bool {
        self.violation == 0.0
    }

    /// Total order for ranking: feasible first, then by the first goal's
    /// cost, then the second's; infeasible by their violation.
    pub fn rank_key(&self) -> (u8, f64, f64) {
        if self.feasible() {
            (0, self.costs[0], self.costs.get(1).copied().unwrap_or(0.0))
        } else {
            (1, self.violation, self.costs[0])
        }
    }

    /// Whether `self` dominates `other` on every goal (and is feasible).
    pub fn dominates(&self, other: &Score) -> bool {
        self.feasible()
            && self.costs.iter().zip(&other.costs).all(|(a, b)| a <= b)
            && self.costs.iter().zip(&other.costs).any(|(a, b)| a < b)
    }
}

impl Objective {
    /// Score `f`, or say which metric it lacks.
    pub fn score(&self, f: &Figures) -> Result<Score, String> {
        let mut values = Vec::new();
        let mut costs = Vec::new();
        for g in &self.goals {
            values.push(g.metric.value(f)?);
            costs.push(g.cost(f)?);
        }
        let mut violation = 0.0;
        for c in &self.constraints {
            violation += c.violation(f)?;
        }
        Ok(Score {
            values,
            costs,
            violation,
        })
    }

    /// Whether the objective reads group shares.
    pub fn needs_groups(&self) -> bool {
        self.constraints
            .iter()
            .any(|c| matches!(c, Constraint::Shares { .. }))
    }

    pub fn parse(text: &str) -> Result<Objective, ObjectiveError> {
        let err = |m: String| ObjectiveError {
            text: text.to_string(),
            message: m,
        };
        let lower = text.trim().to_ascii_lowercase();
        let (head, tail) = match lower.split_once("subject to") {
            Some((h, t)) => (h.trim().to_string(), Some(t.trim().to_string())),
            None => (lower.clone(), None),
        };
        let mut goals = Vec::new();
        let mut constraints = Vec::new();
        for part in head.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if let Some(rest) = part.strip_prefix("weights shares within") {
                constraints.push(Constraint::Shares {
                    tolerance: parse_percent(rest).map_err(&err)?,
                });
            } else if let Some(rest) = part.strip_prefix("minimize") {
                goals.push(Goal {
                    direction: Direction::Minimize,
                    metric: parse_metric(rest, text).map_err(&err)?,
                });
            } else if let Some(rest) = part.strip_prefix("maximize") {
                goals.push(Goal {
                    direction: Direction::Maximize,
                    metric: parse_metric(rest, text).map_err(&err)?,
                });
            } else {
                return Err(err(format!(
                    "{part:?}: expected `minimize METRIC`, `maximize METRIC` or \
                     `weights shares within N%`"
                )));
            }
        }
        if let Some(t) = tail {
            for c in t.split(" and ").map(str::trim) {
                constraints.push(parse_constraint(c, text).map_err(&err)?);
            }
        }
        if goals.is_empty() {
            if constraints.is_empty() {
                return Err(err(
                    "no goal: say `minimize METRIC` or `maximize METRIC`".into()
                ));
            }
            goals.push(Goal {
                direction: Direction::Maximize,
                metric: Metric {
                    name: MetricName::MbS,
                    job: None,
                },
            });
        }
        if goals.len() > 2 {
            return Err(err("at most two goals (a two-metric objective)".into()));
        }
        Ok(Objective {
            text: text.trim().to_string(),
            goals,
            constraints,
        })
    }
}

/// A bad objective expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectiveError {
    pub text: String,
    pub message: String,
}

impl fmt::Display for ObjectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--objective {:?}: {}", self.text, self.message)
    }
}

impl std::error::Error for ObjectiveError {}

fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches('%').trim();
    let v: f64 = t
        .parse()
        .map_err(|_| format!("{s:?}: expected a percentage such as 10%"))?;
    if !(v > 0.0 && v < 1000.0) {
        return Err(format!("{s:?}: want a percentage above 0"));
    }
    Ok(v / 100.0)
}

fn parse_metric(s: &str, _all: &str) -> Result<Metric, String> {
    let s = s.trim();
    let (name, job) = match s.split_once('(') {
        Some((n, rest)) => {
            let job = rest
                .strip_suffix(')')
                .ok_or_else(|| format!("{s:?}: missing `)`"))?
                .trim();
            if job.is_empty() {
                return Err(format!("{s:?}: empty job name"));
            }
            (n.trim(), Some(job.to_string()))
        }
        None => (s, None),
    };
    let name = MetricName::ALL
        .iter()
        .find(|(n, _)| *n == name)
        .map(|p| p.1)
        .ok_or_else(|| {
            format!(
                "unknown metric {name:?} (known: {})",
                MetricName::ALL.map(|p| p.0).join(", ")
            )
        })?;
    Ok(Metric { name, job })
}

fn parse_constraint(s: &str, all: &str) -> Result<Constraint, String> {
    for (tok, op) in [
        ("<=", Compare::Le),
        (">=", Compare::Ge),
        ("<", Compare::Lt),
        (">", Compare::Gt),
    ] {
        if let Some((m, v)) = s.split_once(tok) {
            let metric = parse_metric(m, all)?;
            let v = v.trim();
            let digits = v
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(v.len());
            let number: f64 = v[..digits]
                .parse()
                .map_err(|_| format!("{v:?}: expected a number"))?;
            let unit = v[digits..].trim();
            let scale = match (metric.name.is_latency(), unit) {
                (true, "" | "ms") => 1.0,
                (true, "us") => 1e-3,
                (true, "s") => 1e3,
                (false, "" | "mb/s" | "iops") => 1.0,
                _ => return Err(format!("{v:?}: unit {unit:?} does not fit {metric}")),
            };
            return Ok(Constraint::Bound {
                metric,
                op,
                bound: number * scale,
            });
        }
    }
    Err(format!(
        "{s:?}: expected METRIC < VALUE (or <=, >, >=), e.g. p99(app) < 50ms"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> Figures {
        let job = |name: &str, p99: f64, mb: f64| JobFigures {
            name: name.into(),
            p50_ms: p99 / 2.0,
            p99_ms: p99,
            p999_ms: p99,
            mean_ms: p99 / 2.0,
            max_ms: p99,
            mb_s: mb,
            iops: mb * 256.0,
        };
        Figures {
            jobs: vec![
                job("reader.0", 10.0, 1.0),
                job("reader.1", 30.0, 2.0),
                job("app", 40.0, 5.0),
            ],
            total_mb_s: 8.0,
            total_iops: 2048.0,
            groups: vec![
                GroupShare {
                    name: "a".into(),
                    weight: 100,
                    share: 0.27,
                },
                GroupShare {
                    name: "b".into(),
                    weight: 300,
                    share: 0.73,
                },
            ],
        }
    }

    #[test]
    fn the_issue_examples_parse_and_score() {
        let f = figures();
        let o = Objective::parse("minimize p99(reader)").unwrap();
        assert_eq!(o.score(&f).unwrap().values, vec![30.0]);
        let o = Objective::parse("maximize mb_s subject to p99(app) < 50ms").unwrap();
        let s = o.score(&f).unwrap();
        assert!(s.feasible());
        assert_eq!(s.costs, vec![-8.0]);
        let o = Objective::parse("maximize mb_s subject to p99(app) < 20 ms").unwrap();
        assert!(!o.score(&f).unwrap().feasible());
        let o = Objective::parse("weights shares within 10%").unwrap();
        assert!(o.score(&f).unwrap().feasible()); // 0.27 of 0.25: 8 % off
        let o = Objective::parse("weights shares within 5%").unwrap();
        assert!(!o.score(&f).unwrap().feasible());
        let o = Objective::parse("minimize p99(app), maximize mb_s").unwrap();
        assert_eq!(o.goals.len(), 2);
    }

    #[test]
    fn bad_objectives_say_what_is_wrong() {
        for (text, words) in [
            ("minimize p98", "unknown metric"),
            ("shrink p99", "expected `minimize"),
            ("maximize mb_s subject to p99 ~ 3", "expected METRIC <"),
            ("minimize p99(x", "missing `)`"),
            ("maximize mb_s subject to p99 < 3 MB/s", "does not fit"),
        ] {
            let e = Objective::parse(text).unwrap_err().to_string();
            assert!(e.contains(words), "{text}: {e}");
        }
        let e = Objective::parse("minimize p99(writer)")
            .unwrap()
            .score(&figures())
            .unwrap_err();
        assert!(e.contains("no job"), "{e}");
    }
}
