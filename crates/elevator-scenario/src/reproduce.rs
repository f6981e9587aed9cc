//! `elevator reproduce`: every published table in one run, with verdicts.
//!
//! The evidence is every built-in scenario that carries a `[published]`
//! table (the ten 2003 experiments of shared/seeds/morton-2003-iosched-
//! benchmarks.txt, and any later scenario that cites figures) and the 2016
//! BFQ cover letter's table (shared/seeds/valente-2016-bfq-cover-letter.txt)
//! on both of its devices. Each is cut into [`Table`]s: one per scenario, one
//! per row of the letter. A table's [`Verdict`] says how many pairs of
//! policies we order as the authors measured them and how many of our
//! figures are within 2× of theirs.
//!
//! The unit of work is one scenario under one policy (or the letter on one
//! device); units run in parallel on `jobs` threads. Results are a pure
//! function of the scenarios and seeds: the threads only decide when a unit
//! runs, and the tables are assembled in the fixed order of the units.
//!
//! [`Expectations`] are the committed verdicts (`scenarios/expected/
//! reproduce.toml`): [`Expectations::check`] lists every table that got
//! worse, which is how CI holds the line.

use crate::letter::{self, Background, LetterOptions, APPS, LETTER_DEVICE};
use crate::{run, RunOptions, Scenario, ScenarioError};
use elevator_metrics::text::{columns, wrap, WIDTH};
use elevator_metrics::{Report, RunReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Scenarios the letter is built from: their figures are the letter's
/// rows, so they are reported there, not twice.
const LETTER_SCENARIOS: [&str; 2] = ["bfq-startup-seq", "bfq-startup-random"];

/// Two published figures closer than this (relative) are a tie: they say
/// nothing about order. The letter prints deadline and noop, which do the
/// same on its SSD, 1-6 % apart (1.91 vs 1.88 s, 10.2 vs 10.8 s), and the
/// 2003 thread's repeated runs spread as much (deadline 132.0-133.5 s).
pub const TIE: f64 = 0.10;

/// How far from the published figure a value may be and still count as
/// reproduced (the measure: within 2×).
pub const WITHIN: f64 = 2.0;

/// A published figure as the seed prints it: `447 (2.5.61+hacks)`,
/// `132.0-133.5 (...)` (a range over repeated runs), `> 900 (...)` or `>60`
/// (a lower bound: the run was killed).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figure {
    /// The text as written, source and all.
    pub text: String,
    pub low: f64,
    pub high: f64,
    /// Only a lower bound is known.
    pub at_least: bool,
}

impl Figure {
    /// The figure in `text`, `None` when it starts with no number.
    pub fn parse(text: &str) -> Option<Figure> {
        let t = text.trim();
        let (at_least, t) = match t.strip_prefix('>') {
            Some(rest) => (true, rest.trim_start()),
            None => (false, t),
        };
        let number: String = t
            .chars()
            .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '–'))
            .collect();
        let (low, high) = match number.split_once(['-', '–']) {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let v: f64 = number.parse().ok()?;
                (v, v)
            }
        };
        (low <= high).then(|| Figure {
            text: text.trim().to_string(),
            low,
            high,
            at_least,
        })
    }

    /// The number alone (`132.0-133.5`, `> 900`).
    pub fn number(&self) -> String {
        let t = self.text.split(" (").next().unwrap_or(&self.text);
        t.trim().to_string()
    }

    /// What follows the number: the kernel or note (`2.5.61+hacks`).
    pub fn source(&self) -> &str {
        match self.text.split_once(" (") {
            Some((_, rest)) => rest.strip_suffix(')').unwrap_or(rest),
            None => "",
        }
    }

    fn mid(&self) -> f64 {
        (self.low + self.high) / 2.0
    }
}

/// One policy's figure in a table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The policy.
    pub label: String,
    /// Our figure (`None`: the run produced none).
    pub ours: Option<f64>,
    /// Our figure is a lower bound: the job was cut by the time limit.
    pub ours_at_least: bool,
    pub published: Option<Figure>,
}

impl Row {
    /// Ours over the published figure (its middle for a range, its bound
    /// for a lower bound).
    pub fn ratio(&self) -> Option<f64> {
        let p = self.published.as_ref()?;
        let ours = self.ours?;
        (p.mid() > 0.0).then(|| ours / p.mid())
    }

    /// Whether ours is within [`WITHIN`]× of the published figure (`None`:
    /// nothing to compare). A bound counts only when the other side can
    /// meet it: ours must reach half a published lower bound; a lower
    /// bound of ours counts only against a published one.
    pub fn within(&self) -> Option<bool> {
        let p = self.published.as_ref()?;
        let Some(ours) = self.ours else {
            return Some(false);
        };
        Some(match (self.ours_at_least, p.at_least) {
            (_, true) => ours * WITHIN >= p.low,
            (true, false) => false,
            (false, false) => ours * WITHIN >= p.low && ours <= p.high * WITHIN,
        })
    }

    /// Our figure as printed: `629`, `> 60`, `n/a`.
    pub fn ours_text(&self, unit: &str) -> String {
        match self.ours {
            None => "n/a".into(),
            Some(v) if self.ours_at_least => format!("> {}", fmt_value(v, unit)),
            Some(v) => fmt_value(v, unit),
        }
    }
}

/// A value with as many decimals as its size calls for.
pub fn fmt_value(v: f64, unit: &str) -> String {
    if unit == "%" || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One published table: policies side by side for one measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Table {
    /// Stable name, the key of the expectations file.
    pub id: String,
    /// Tables of one family share a README table (`2003 benchmarks`).
    pub family: String,
    /// The row name in the family's README table.
    pub short: String,
    pub title: String,
    /// The figure's name and unit.
    pub measure: String,
    pub unit: String,
    /// Device, seed and the settings in force.
    pub settings: String,
    pub rows: Vec<Row>,
}

/// How a table compares with the published one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Pairs of policies the published figures order (ties left out).
    pub pairs: usize,
    /// Of those, the pairs we order the same way.
    pub pairs_in_order: usize,
    /// Policies with both a published figure and ours.
    pub values: usize,
    /// Of those, ours within 2× of the published.
    pub within_2x: usize,
}

impl Verdict {
    pub fn ordered(&self) -> bool {
        self.pairs_in_order == self.pairs
    }
    /// Whether it says anything: some published figure to compare with.
    pub fn counts(&self) -> bool {
        self.values > 0
    }
}

/// `Less` when `a` is clearly below `b`, `Equal` for a tie or an
/// undecidable pair of bounds.
fn order(a: (f64, bool), b: (f64, bool)) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering::*;
    let ((a, a_bound), (b, b_bound)) = (a, b);
    if a_bound && b_bound {
        return None;
    }
    let tie = (a - b).abs() <= TIE * a.abs().max(b.abs());
    Some(if tie {
        Equal
    } else if a < b {
        // A lower bound below the other figure can still exceed it.
        if a_bound {
            return None;
        }
        Less
    } else {
        if b_bound {
            return None;
        }
        Greater
    })
}

impl Table {
    pub fn verdict(&self) -> Verdict {
        let compared: Vec<&Row> = self.rows.iter().filter(|r| r.published.is_some()).collect();
        let mut v = Verdict {
            pairs: 0,
            pairs_in_order: 0,
            values: 0,
            within_2x: 0,
        };
        for r in &compared {
            v.values += 1;
            v.within_2x += usize::from(r.within() == Some(true));
        }
        for (i, a) in compared.iter().enumerate() {
            for b in &compared[i + 1..] {
                let (pa, pb) = (a.published.as_ref(), b.published.as_ref());
                let (Some(pa), Some(pb)) = (pa, pb) else {
                    continue;
                };
                let published = order((pa.mid(), pa.at_least), (pb.mid(), pb.at_least));
                let Some(published) = published.filter(|o| o.is_ne()) else {
                    continue;
                };
                v.pairs += 1;
                let ours = match (a.ours, b.ours) {
                    (Some(x), Some(y)) => order((x, a.ours_at_least), (y, b.ours_at_least)),
                    _ => None,
                };
                v.pairs_in_order += usize::from(ours == Some(published));
            }
        }
        v
    }

    /// The policies with published figures, smallest first, by `key`.
    fn ranking(&self, key: impl Fn(&Row) -> Option<f64>) -> String {
        let mut rows: Vec<(&str, f64)> = self
            .rows
            .iter()
            .filter(|r| r.published.is_some())
            .filter_map(|r| Some((r.label.as_str(), key(r)?)))
            .collect();
        rows.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
        rows.iter().map(|r| r.0).collect::<Vec<_>>().join(" < ")
    }
}

/// Everything one `reproduce` printed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reproduction {
    pub tables: Vec<Table>,
    /// The scenarios' full reports (what `elevator run` prints), in order.
    #[serde(skip)]
    pub reports: Vec<Report>,
    /// Threads the units ran on.
    pub jobs: usize,
}

/// The summary line's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Tables whose published figures order some pair of policies.
    pub tables: usize,
    /// Of those, the tables we order alike in every such pair.
    pub ordered: usize,
    pub values: usize,
    pub within_2x: usize,
}

impl Reproduction {
    pub fn summary(&self) -> Summary {
        let verdicts: Vec<Verdict> = self
            .tables
            .iter()
            .map(Table::verdict)
            .filter(Verdict::counts)
            .collect();
        let ordering: Vec<&Verdict> = verdicts.iter().filter(|v| v.pairs > 0).collect();
        Summary {
            tables: ordering.len(),
            ordered: ordering.iter().filter(|v| v.ordered()).count(),
            values: verdicts.iter().map(|v| v.values).sum(),
            within_2x: verdicts.iter().map(|v| v.within_2x).sum(),
        }
    }
}

/// What to reproduce and how.
#[derive(Clone, Debug, Default)]
pub struct ReproduceOptions {
    /// Only experiments whose name contains this.
    pub only: Option<String>,
    /// Threads (0: one per core).
    pub jobs: usize,
    /// Tunable and block overrides for every run, as `--set` gives them.
    pub tunables: Vec<(String, String, i64)>,
    /// Another device for the scenarios (not the letter, which names its
    /// devices), e.g. a perturbed profile.
    pub device: Option<String>,
}

/// The name `reproduce` gives the letter on a device.
fn letter_name(device: &str) -> String {
    format!("bfq-letter-2016/{device}")
}

/// The experiments `reproduce` runs, in order: every built-in scenario
/// with published figures, then the letter on each of its devices.
pub fn experiments() -> Vec<String> {
    let mut names: Vec<String> = crate::builtins()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !LETTER_SCENARIOS.contains(n))
        .filter(|n| crate::builtin(n).is_some_and(|s| s.is_ok_and(|s| !s.published.is_empty())))
        .map(str::to_string)
        .collect();
    for d in LetterOptions::default().devices {
        names.push(letter_name(&d));
    }
    names
}

/// One piece of work.
enum Unit {
    Policy { scenario: usize, policy: String },
    Letter { device: String },
}

enum Done {
    Policy(Report),
    Letter(letter::LetterReport),
}

/// Progress as units finish: (units done, units in all, what finished).
pub type Progress<'a> = &'a (dyn Fn(usize, usize, &str) + Sync);

/// Run every experiment matching `options.only`, `progress` hearing each
/// finished unit.
pub fn reproduce(
    options: &ReproduceOptions,
    progress: Progress<'_>,
) -> Result<Reproduction, ScenarioError> {
    let cli = |m: String| ScenarioError::new("<command line>", None, Some("only"), m);
    let chosen: Vec<String> = experiments()
        .into_iter()
        .filter(|n| match &options.only {
            Some(p) => n.contains(p.as_str()),
            None => true,
        })
        .collect();
    if chosen.is_empty() {
        return Err(cli(format!(
            "--only {:?} matches no experiment (known: {})",
            options.only.as_deref().unwrap_or(""),
            experiments().join(", ")
        )));
    }
    let mut scenarios: Vec<Scenario> = Vec::new();
    let mut units = Vec::new();
    for name in &chosen {
        if let Some(device) = name.strip_prefix(&letter_name("")) {
            units.push(Unit::Letter {
                device: device.to_string(),
            });
            continue;
        }
        let s = crate::builtin(name).expect("listed built-in")?;
        for policy in &s.schedulers {
            units.push(Unit::Policy {
                scenario: scenarios.len(),
                policy: policy.clone(),
            });
        }
        scenarios.push(s);
    }
    let jobs = if options.jobs == 0 {
        std::thread::available_parallelism().map_or(1, usize::from)
    } else {
        options.jobs
    };
    let done = run_units(&units, &scenarios, options, jobs, progress)?;

    // Gather, in the units' order.
    let mut tables = Vec::new();
    let mut reports: BTreeMap<usize, Report> = BTreeMap::new();
    for (unit, result) in units.iter().zip(done) {
        match (unit, result) {
            (Unit::Policy { scenario, .. }, Done::Policy(r)) => match reports.get_mut(scenario) {
                Some(all) => all.runs.extend(r.runs),
                None => {
                    reports.insert(*scenario, r);
                }
            },
            (Unit::Letter { .. }, Done::Letter(l)) => tables.extend(letter_tables(&l)),
            _ => unreachable!("each unit gives its own kind"),
        }
    }
    let mut scenario_tables: Vec<Table> = reports
        .iter()
        .map(|(i, r)| scenario_table(&scenarios[*i], r, &options.tunables))
        .collect();
    scenario_tables.append(&mut tables);
    Ok(Reproduction {
        tables: scenario_tables,
        reports: reports.into_values().collect(),
        jobs,
    })
}

/// Run `units` on `jobs` threads; the results come back in the units' order.
fn run_units(
    units: &[Unit],
    scenarios: &[Scenario],
    options: &ReproduceOptions,
    jobs: usize,
    progress: Progress<'_>,
) -> Result<Vec<Done>, ScenarioError> {
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Done, ScenarioError>>>> =
        Mutex::new((0..units.len()).map(|_| None).collect());
    // The longest units first, so that no core idles at the end: the
    // letter runs 44 simulations per device, tree reads run for minutes
    // of simulated time.
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(weight(&units[i], scenarios)));
    let work = || loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(&i) = order.get(k) else { break };
        let (result, what) = match &units[i] {
            Unit::Policy { scenario, policy } => {
                let s = &scenarios[*scenario];
                let opts = RunOptions {
                    schedulers: Some(vec![policy.clone()]),
                    device: options.device.clone(),
                    seed: None,
                    tunables: options.tunables.clone(),
                    trace: false,
                    check: false,
                };
                let r = run(s, &opts, &mut |_| {}).map(Done::Policy);
                (r, format!("{} {policy}", s.name))
            }
            Unit::Letter { device } => {
                let opts = LetterOptions {
                    devices: vec![device.clone()],
                    ..LetterOptions::default()
                };
                let r = letter::run_letter(&opts, &mut |_| {}).map(Done::Letter);
                (r, letter_name(device))
            }
        };
        let failed = result.is_err();
        results.lock().expect("no thread panicked")[i] = Some(result);
        let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
        progress(n, units.len(), &what);
        if failed {
            // Let the other threads stop at their next unit.
            next.store(units.len(), Ordering::Relaxed);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..jobs.min(units.len()) {
            scope.spawn(work);
        }
        work();
    });
    let results = results.into_inner().expect("no thread panicked");
    // A unit is skipped only after another failed: report that error.
    if let Some(e) = results.iter().flatten().find_map(|r| r.as_ref().err()) {
        return Err(e.clone());
    }
    Ok(results.into_iter().flatten().flatten().collect())
}

/// A rough cost to order the units by: the simulated time the scenario
/// allows, with tree reads (`find-cat`) and the letter first.
fn weight(unit: &Unit, scenarios: &[Scenario]) -> u64 {
    match unit {
        Unit::Letter { .. } => 3,
        Unit::Policy { scenario, policy } => {
            let s = &scenarios[*scenario];
            let tree = s
                .host
                .as_ref()
                .is_some_and(|h| h.processes.iter().any(|p| p.program.name == "find-cat"));
            // The 2.4 elevator and noop starve the tree read the longest.
            let slow_policy = matches!(policy.as_str(), "linus24" | "noop" | "deadline");
            u64::from(tree) * 2 + u64::from(tree && slow_policy) * 2
        }
    }
}

/// The settings in force for a scenario's runs: device, seed, and any
/// tunable the scenario or the command line sets.
fn settings(s: &Scenario, report: &Report, overrides: &[(String, String, i64)]) -> String {
    let mut parts = vec![
        format!("device {}", report.device),
        format!("seed {}", report.seed),
    ];
    for (policy, values) in &s.tunables {
        for (k, v) in values {
            parts.push(format!("{policy}.{k}={v}"));
        }
    }
    for (p, k, v) in overrides {
        parts.push(format!("--set {p}.{k}={v}"));
    }
    parts.join(", ")
}

fn scenario_table(s: &Scenario, report: &Report, overrides: &[(String, String, i64)]) -> Table {
    let unit = s.result.unit.clone();
    let rows = report.runs.iter().map(|r| scenario_row(s, r)).collect();
    let short = s
        .name
        .strip_prefix("morton-")
        .and_then(|rest| rest.split('-').next())
        .map_or_else(|| s.name.clone(), |n| format!("{n}: {}", s.description));
    Table {
        id: s.name.clone(),
        family: if s.name.starts_with("morton-") {
            "The 2003 benchmarks on ide-2003 (Morton, LKML, 20 Feb 2003)".into()
        } else {
            format!("{} on {}", s.name, report.device)
        },
        short,
        title: format!("{}: {}", s.name, s.description),
        measure: s.result.name.clone(),
        unit,
        settings: settings(s, report, overrides),
        rows,
    }
}

fn scenario_row(_s: &Scenario, r: &RunReport) -> Row {
    Row {
        label: r.label(),
        ours: r.result.value.is_finite().then_some(r.result.value),
        ours_at_least: r.result.cut,
        published: r.published.as_deref().and_then(Figure::parse),
    }
}

/// The letter's rows on one device, one table each.
fn letter_tables(report: &letter::LetterReport) -> Vec<Table> {
    let mut out = Vec::new();
    for d in &report.devices {
        let published = d.device == LETTER_DEVICE;
        let settings = format!(
            "device {}, seeds of bfq-startup-seq/-random, think_scale {}{}",
            d.device,
            report.think_scale,
            if published {
                ""
            } else {
                "; the letter measured only its SSD"
            }
        );
        let family = format!("The 2016 BFQ cover letter on {}", d.device);
        let figure = |row: &str, bg: Background, s: &str| {
            letter::letter_figure(row, bg, s)
                .filter(|_| published)
                .and_then(Figure::parse)
        };
        for (bg, what) in [
            (Background::Sequential, "10 raw seq. readers"),
            (Background::Random, "10 raw random readers"),
        ] {
            out.push(Table {
                id: format!("{}/throughput-{}", letter_name(&d.device), bg_word(bg)),
                family: family.clone(),
                short: format!("{what}, MiB/s"),
                title: format!("letter on {}: {what}, aggregate throughput", d.device),
                measure: "aggregate throughput".into(),
                unit: "MiB/s".into(),
                settings: settings.clone(),
                rows: report
                    .schedulers
                    .iter()
                    .map(|s| Row {
                        label: s.clone(),
                        ours: d.throughput(bg, s),
                        ours_at_least: false,
                        published: figure("throughput", bg, s),
                    })
                    .collect(),
            });
        }
        for bg in [Background::Sequential, Background::Random] {
            for &(row, trace, ours_name) in &APPS {
                let app = if row == trace {
                    row.to_string()
                } else {
                    format!("{row} ({ours_name})")
                };
                out.push(Table {
                    id: format!("{}/{row}-{}", letter_name(&d.device), bg_word(bg)),
                    family: family.clone(),
                    short: format!("{app} start-up, 10 {} readers, s", bg_word(bg)),
                    title: format!(
                        "letter on {}: {app} start-up against 10 {} readers",
                        d.device,
                        bg_word(bg)
                    ),
                    measure: "start-up time".into(),
                    unit: "s".into(),
                    settings: settings.clone(),
                    rows: report
                        .schedulers
                        .iter()
                        .map(|s| {
                            let v = d.startup.get(&(bg, row.to_string(), s.clone()));
                            Row {
                                label: s.clone(),
                                // Past the letter's timeout: at least that.
                                ours: v.map(|v| v.unwrap_or(letter::TIMEOUT_S)),
                                ours_at_least: matches!(v, Some(None)),
                                published: figure(row, bg, s),
                            }
                        })
                        .collect(),
                });
            }
        }
    }
    out
}

fn bg_word(bg: Background) -> &'static str {
    match bg {
        Background::Sequential => "seq",
        Background::Random => "random",
        Background::Idle => "idle",
    }
}

impl Reproduction {
    /// Per table: ours beside the published figure with the ratio, the
    /// verdict and the settings in force; then the summary (without the
    /// wall time, which the caller measures).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for t in &self.tables {
            let _ = writeln!(out, "{}", wrap(&t.title, WIDTH, ""));
            let _ = writeln!(out, "{} ({})", t.measure, t.unit);
            let mut rows = vec![vec![
                "policy".to_string(),
                "ours".into(),
                "published".into(),
                "ratio".into(),
                "within 2x".into(),
                "source".into(),
            ]];
            for r in &t.rows {
                let p = r.published.as_ref();
                rows.push(vec![
                    r.label.clone(),
                    r.ours_text(&t.unit),
                    p.map_or("-".into(), Figure::number),
                    r.ratio().map_or("-".into(), |x| format!("{x:.2}")),
                    r.within()
                        .map_or("-", |w| if w { "yes" } else { "no" })
                        .into(),
                    p.map_or(String::new(), |p| p.source().to_string()),
                ]);
            }
            columns(&mut out, &rows);
            let v = t.verdict();
            if v.counts() {
                let ordering = if v.pairs == 0 {
                    "ordering: the published figures tie".to_string()
                } else if v.ordered() {
                    format!("ordering matches ({}/{} pairs)", v.pairs_in_order, v.pairs)
                } else {
                    format!("ordering differs ({}/{} pairs)", v.pairs_in_order, v.pairs)
                };
                let _ = writeln!(
                    out,
                    "  verdict: {ordering}; {}/{} within 2x",
                    v.within_2x, v.values
                );
                if v.pairs > 0 && !v.ordered() {
                    let published = t.ranking(|r| r.published.as_ref().map(Figure::mid));
                    let ours = t.ranking(|r| r.ours);
                    let _ = writeln!(out, "{}", wrap(&published, WIDTH, "    published: "));
                    let _ = writeln!(out, "{}", wrap(&ours, WIDTH, "    ours:      "));
                }
            } else {
                let _ = writeln!(out, "  verdict: no published figure to compare with");
            }
            let _ = writeln!(out, "{}", wrap(&t.settings, WIDTH, "  settings: "));
            let _ = writeln!(out);
        }
        let s = self.summary();
        let _ = writeln!(
            out,
            "summary: orderings matched {}/{} tables, {}/{} values within 2x of the published",
            s.ordered, s.tables, s.within_2x, s.values
        );
        out
    }

    /// The README's tables: per family, one row per table, ours with the
    /// published figure in brackets, and the verdict.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let mut families: Vec<&str> = Vec::new();
        for t in &self.tables {
            if !families.contains(&t.family.as_str()) {
                families.push(&t.family);
            }
        }
        for family in families {
            let tables: Vec<&Table> = self.tables.iter().filter(|t| t.family == family).collect();
            let mut policies: Vec<&str> = Vec::new();
            for t in &tables {
                for r in &t.rows {
                    if !policies.contains(&r.label.as_str()) {
                        policies.push(&r.label);
                    }
                }
            }
            let _ = writeln!(out, "#### {family}\n");
            let _ = writeln!(out, "| | {} | order | within 2× |", policies.join(" | "));
            let _ = writeln!(out, "|---{}|---|---|", "|---".repeat(policies.len()));
            for t in &tables {
                let mut cells = vec![t.short.replace('|', "\\|")];
                for p in &policies {
                    cells.push(match t.rows.iter().find(|r| r.label == *p) {
                        Some(r) => match &r.published {
                            Some(f) => format!("{} ({})", r.ours_text(&t.unit), f.number()),
                            None => r.ours_text(&t.unit),
                        },
                        None => "".into(),
                    });
                }
                let v = t.verdict();
                if v.counts() {
                    cells.push(if v.pairs == 0 {
                        "tie".into()
                    } else {
                        format!("{}/{}", v.pairs_in_order, v.pairs)
                    });
                    cells.push(format!("{}/{}", v.within_2x, v.values));
                } else {
                    cells.push("–".into());
                    cells.push("–".into());
                }
                let _ = writeln!(out, "| {} |", cells.join(" | "));
            }
            let _ = writeln!(out);
        }
        let s = self.summary();
        let _ = writeln!(
            out,
            "Orderings matched in {}/{} tables (pairs of policies whose published figures differ by \
             more than {:.0} %); {}/{} of our figures within 2× of the published ones.",
            s.ordered,
            s.tables,
            TIE * 100.0,
            s.within_2x,
            s.values
        );
        out
    }

    /// JSON: every table with its verdict, and the summary.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct WithVerdict<'a> {
            #[serde(flatten)]
            table: &'a Table,
            verdict: Verdict,
        }
        #[derive(Serialize)]
        struct Out<'a> {
            tables: Vec<WithVerdict<'a>>,
            summary: Summary,
        }
        let out = Out {
            tables: self
                .tables
                .iter()
                .map(|t| WithVerdict {
                    table: t,
                    verdict: t.verdict(),
                })
                .collect(),
            summary: self.summary(),
        };
        serde_json::to_string_pretty(&out).expect("tables serialise") + "\n"
    }
}

/// The committed verdicts, by table id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Expectations {
    pub tables: BTreeMap<String, Verdict>,
}

/// The committed expectations file, in the source tree.
pub const EXPECTATIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scenarios/expected/reproduce.toml"
);

/// The header of the expectations file.
const EXPECT_HEADER: &str = "\
# The verdicts `elevator reproduce` reached when last blessed: per table, the pairs of policies
# the published figures order, how many of those we order alike, the policies with a published
# figure and how many of ours are within 2x. `elevator reproduce --check` fails when a table does
# worse than this; `elevator reproduce --bless` rewrites it. Do not edit by hand.
";

impl Expectations {
    pub fn of(r: &Reproduction) -> Expectations {
        Expectations {
            tables: r
                .tables
                .iter()
                .map(|t| (t.id.clone(), t.verdict()))
                .collect(),
        }
    }

    pub fn parse(file: &str, text: &str) -> Result<Expectations, ScenarioError> {
        toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            ScenarioError::new(file, line, None, e.message().to_string())
        })
    }

    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).expect("expectations serialise");
        format!("{EXPECT_HEADER}\n{body}")
    }

    /// Merge `newer` in: its tables replace ours, others stay (a partial
    /// `--only` bless keeps the rest).
    pub fn update(&mut self, newer: Expectations) {
        self.tables.extend(newer.tables);
    }

    /// One line per table of `r` that does worse than committed, and per
    /// table that has no committed verdict.
    pub fn check(&self, r: &Reproduction) -> Vec<String> {
        let mut problems = Vec::new();
        for t in &r.tables {
            let now = t.verdict();
            let Some(was) = self.tables.get(&t.id) else {
                problems.push(format!(
                    "{}: no committed verdict (run `elevator reproduce --bless`)",
                    t.id
                ));
                continue;
            };
            if now.pairs_in_order < was.pairs_in_order || now.pairs < was.pairs {
                problems.push(format!(
                    "{}: ordering worse: {}/{} pairs in order, committed {}/{}",
                    t.id, now.pairs_in_order, now.pairs, was.pairs_in_order, was.pairs
                ));
            }
            if now.within_2x < was.within_2x || now.values < was.values {
                problems.push(format!(
                    "{}: within 2x worse: {}/{}, committed {}/{}",
                    t.id, now.within_2x, now.values, was.within_2x, was.values
                ));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, ours: f64, published: &str) -> Row {
        Row {
            label: label.into(),
            ours: Some(ours),
            ours_at_least: false,
            published: Figure::parse(published),
        }
    }

    #[test]
    fn figures_parse_as_the_seeds_write_them() {
        let f = Figure::parse("132.0-133.5 (2.5.61+hacks)").unwrap();
        assert_eq!((f.low, f.high, f.at_least), (132.0, 133.5, false));
        assert_eq!(
            (f.number().as_str(), f.source()),
            ("132.0-133.5", "2.5.61+hacks")
        );
        let f = Figure::parse("> 900 (2.4.21-pre4, killed after 15 minutes)").unwrap();
        assert_eq!((f.low, f.at_least), (900.0, true));
        assert_eq!(f.number(), "> 900");
        let f = Figure::parse(">60").unwrap();
        assert_eq!((f.low, f.at_least), (60.0, true));
        assert_eq!(Figure::parse("0.21").unwrap().high, 0.21);
        assert_eq!(Figure::parse("(none)"), None);
        assert_eq!(Figure::parse("-"), None);
    }

    #[test]
    fn within_two_times_honours_ranges_and_bounds() {
        assert_eq!(row("a", 260.0, "132.0-133.5").within(), Some(true));
        assert_eq!(row("a", 270.0, "132.0-133.5").within(), Some(false));
        assert_eq!(row("a", 60.0, "132.0-133.5").within(), Some(false));
        assert_eq!(row("a", 500.0, "> 900").within(), Some(true));
        assert_eq!(row("a", 400.0, "> 900").within(), Some(false));
        let mut cut = row("a", 60.0, "1.91");
        cut.ours_at_least = true;
        assert_eq!(cut.within(), Some(false));
        let mut cut = row("a", 60.0, ">60");
        cut.ours_at_least = true;
        assert_eq!(cut.within(), Some(true));
        assert_eq!(row("a", 1.0, "").within(), None);
    }

    #[test]
    fn verdict_counts_pairs_the_published_figures_order() {
        let table = |rows| Table {
            id: "t".into(),
            family: "f".into(),
            short: "t".into(),
            title: "t".into(),
            measure: "m".into(),
            unit: "s".into(),
            settings: String::new(),
            rows,
        };
        // Published: as < deadline < cfq; 2.4 a lower bound above all.
        let t = table(vec![
            row("noop", 1773.0, ""),
            row("deadline", 629.0, "447"),
            row("anticipatory", 17.3, "17"),
            row("cfq", 27.5, "595"),
            row("linus24", 2739.0, "> 900"),
        ]);
        let v = t.verdict();
        assert_eq!((v.pairs, v.values), (6, 4));
        // Ours puts cfq below deadline: one pair out of order.
        assert_eq!(v.pairs_in_order, 5);
        assert_eq!(v.within_2x, 3, "cfq is 22x off");
        assert!(!v.ordered());
        // Ties (within 10 %) are no pair.
        let t = table(vec![row("deadline", 2.0, "1.91"), row("noop", 1.0, "1.88")]);
        assert_eq!(t.verdict().pairs, 0);
    }

    #[test]
    fn check_flags_a_table_that_got_worse_and_one_never_blessed() {
        let t = Table {
            id: "t".into(),
            family: "f".into(),
            short: "t".into(),
            title: "t".into(),
            measure: "m".into(),
            unit: "s".into(),
            settings: String::new(),
            rows: vec![row("a", 1.0, "1"), row("b", 3.0, "3")],
        };
        let good = Reproduction {
            tables: vec![t.clone()],
            reports: Vec::new(),
            jobs: 1,
        };
        let committed = Expectations::of(&good);
        assert!(committed.check(&good).is_empty());
        let back = Expectations::parse("e.toml", &committed.to_toml()).expect("own output parses");
        assert_eq!(back, committed);
        let mut worse = good.clone();
        worse.tables[0].rows[1].ours = Some(0.5);
        let problems = committed.check(&worse);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(Expectations::default().check(&good)[0].contains("no committed verdict"));
    }
}
