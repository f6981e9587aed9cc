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
use crate::quantity::Unit;
use crate::result::CallStat;
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
/// (a lower bound: the run was killed), and in a `[[table]]` with the unit
/// the thread wrote (`5551KB/s`, `132K usec`), read in the cell's unit.
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
        Figure::split(text).map(|(f, _)| f)
    }

    /// The figure and what follows its number up to the source in
    /// brackets (the unit as written, trimmed).
    fn split(text: &str) -> Option<(Figure, &str)> {
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
        let rest = &t[number.len()..];
        let suffix = rest.split(" (").next().unwrap_or("").trim();
        (low <= high).then(|| {
            (
                Figure {
                    text: text.trim().to_string(),
                    low,
                    high,
                    at_least,
                },
                suffix,
            )
        })
    }

    /// The figure in `text` with its written unit, in `unit`.
    pub fn parse_in(text: &str, unit: &Unit) -> Result<Figure, String> {
        let (mut f, suffix) = Figure::split(text).ok_or_else(|| {
            format!(
                "{text:?}: a figure starts with a number, a range (6.1-37.0) or a bound (> 900)"
            )
        })?;
        let factor = unit.factor_of_written(suffix)?;
        f.low *= factor;
        f.high *= factor;
        Ok(f)
    }

    /// The `stat` of a thread's list of samples, each written in `unit`
    /// or with its own: the sample itself for min, median (nearest rank),
    /// p90 and max, as ours are summed up.
    pub fn of_samples(samples: &[String], stat: CallStat, unit: &Unit) -> Result<Figure, String> {
        let mut values = Vec::new();
        for s in samples {
            let f = Figure::parse_in(s, unit)?;
            if f.at_least || f.low != f.high {
                return Err(format!("{s:?}: a sample is one number"));
            }
            values.push((f.low, s.trim()));
        }
        let numbers: Vec<f64> = values.iter().map(|v| v.0).collect();
        let v = stat
            .of(&numbers)
            .ok_or_else(|| "an empty list of samples".to_string())?;
        let written = match stat {
            CallStat::Count => values.len().to_string(),
            _ => values
                .iter()
                .find(|s| s.0 == v)
                .map_or_else(|| v.to_string(), |s| s.1.to_string()),
        };
        Ok(Figure {
            text: format!("{written} ({} of {})", stat.name(), values.len()),
            low: v,
            high: v,
            at_least: false,
        })
    }

    /// The number alone (`132.0-133.5`, `> 900`), with its unit if written.
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

/// One figure of ours beside the published one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    /// Our figure (`None`: the run produced none).
    pub ours: Option<f64>,
    /// Our figure is a lower bound: the job was cut by the time limit.
    pub ours_at_least: bool,
    pub published: Option<Figure>,
    /// The unit both are in; cells of different units are never ordered
    /// against each other.
    pub unit: String,
    /// Figures this close (in `unit`) tie whatever their ratio, and ours
    /// this close to the published counts as within 2× (the table's
    /// `resolution`; 0 for none).
    #[serde(skip_serializing_if = "is_zero")]
    pub tie: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Cell {
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
    /// bound of ours counts only against a published one. Within the
    /// table's resolution counts too.
    pub fn within(&self) -> Option<bool> {
        let p = self.published.as_ref()?;
        let Some(ours) = self.ours else {
            return Some(false);
        };
        Some(match (self.ours_at_least, p.at_least) {
            (_, true) => ours * WITHIN >= p.low,
            (true, false) => false,
            (false, false) => {
                (ours * WITHIN >= p.low && ours <= p.high * WITHIN)
                    || (ours >= p.low - self.tie && ours <= p.high + self.tie)
            }
        })
    }

    /// Our figure as a single-figure table prints it: `629`, `> 60`, `n/a`.
    pub fn ours_text(&self) -> String {
        match self.ours {
            None => "n/a".into(),
            Some(v) if self.ours_at_least => format!("> {}", fmt_value(v, &self.unit)),
            Some(v) => fmt_value(v, &self.unit),
        }
    }

    /// Our figure as a grid prints it ([`fmt_sig`]).
    pub fn ours_sig(&self) -> String {
        match self.ours {
            None => "n/a".into(),
            Some(v) if self.ours_at_least => format!("> {}", fmt_sig(v, &self.unit)),
            Some(v) => fmt_sig(v, &self.unit),
        }
    }
}

/// A value in a grid: three significant digits (a grid's cells span
/// decades: fsync times of 0.0144 s beside 4.97 s), whole numbers from 100
/// and for counts of bytes and calls.
pub fn fmt_sig(v: f64, unit: &str) -> String {
    let a = v.abs();
    if a >= 100.0 || (matches!(unit, "B" | "KiB" | "kB" | "calls") && v.fract() == 0.0) {
        format!("{v:.0}")
    } else if a == 0.0 {
        "0".into()
    } else {
        let decimals = (2 - a.log10().floor() as i32).clamp(0, 9) as usize;
        format!("{v:.decimals$}")
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

/// A column's heading.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Column {
    pub label: String,
}

/// A row: its label and a cell per column.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The policy, in a single-figure table; the row's label otherwise.
    pub label: String,
    pub cells: Vec<Cell>,
}

impl Row {
    /// A single-figure table's row: one policy's figure.
    pub fn single(label: String, cell: Cell) -> Row {
        Row {
            label,
            cells: vec![cell],
        }
    }
}

/// One published table: a `[published]` map or the letter's row (one
/// column, a row per policy) or a `[[table]]` (any grid).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Table {
    /// Stable name, the key of the expectations file.
    pub id: String,
    /// Tables of one family share a README table (`2003 benchmarks`); a
    /// `[[table]]`'s family is its thread.
    pub family: String,
    /// The row name in the family's README table.
    pub short: String,
    pub title: String,
    /// The figure's name and unit (single-figure tables).
    pub measure: String,
    pub unit: String,
    /// Device, seed and the settings in force.
    pub settings: String,
    /// Where in its thread a `[[table]]`'s figures are; empty for a
    /// single-figure table.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Cells are ordered against the others of their row...
    pub judge_rows: bool,
    /// ... and of their column.
    pub judge_columns: bool,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
}

/// How a table compares with the published one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Pairs of cells the published figures order (ties left out).
    pub pairs: usize,
    /// Of those, the pairs we order the same way.
    pub pairs_in_order: usize,
    /// Cells with both a published figure and ours.
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

/// `Less` when `a` is clearly below `b`, `Equal` for a tie (within
/// [`TIE`] of each other, or `tie` apart) or an undecidable pair of
/// bounds.
fn order(a: (f64, bool), b: (f64, bool), tie: f64) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering::*;
    let ((a, a_bound), (b, b_bound)) = (a, b);
    if a_bound && b_bound {
        return None;
    }
    let tie = (a - b).abs() <= (TIE * a.abs().max(b.abs())).max(tie);
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

/// Whether the published figures of `a` and `b` order them (`None`: they
/// tie, or are not comparable), and if so whether ours agree.
fn judge_pair(a: &Cell, b: &Cell) -> Option<bool> {
    if a.unit != b.unit {
        return None;
    }
    let (pa, pb) = (a.published.as_ref()?, b.published.as_ref()?);
    let tie = a.tie.min(b.tie);
    let published = order((pa.mid(), pa.at_least), (pb.mid(), pb.at_least), tie)?;
    if published.is_eq() {
        return None;
    }
    let ours = match (a.ours, b.ours) {
        (Some(x), Some(y)) => order((x, a.ours_at_least), (y, b.ours_at_least), tie),
        _ => None,
    };
    Some(ours == Some(published))
}

/// A pair of cells the published figures order, and whether ours agree.
#[derive(Clone, Debug, PartialEq)]
pub struct Pair {
    /// (row, column) of each cell.
    pub a: (usize, usize),
    pub b: (usize, usize),
    pub in_order: bool,
}

impl Table {
    /// A single-figure table: one column, a row per policy.
    pub fn is_single(&self) -> bool {
        self.source.is_empty()
    }

    /// Every pair the published figures order: within each row (if
    /// judged) and within each column (if judged).
    pub fn pairs(&self) -> Vec<Pair> {
        let mut out = Vec::new();
        let cell = |(r, c): (usize, usize)| self.rows.get(r).and_then(|row| row.cells.get(c));
        let mut consider = |a: (usize, usize), b: (usize, usize)| {
            if let (Some(x), Some(y)) = (cell(a), cell(b)) {
                if let Some(in_order) = judge_pair(x, y) {
                    out.push(Pair { a, b, in_order });
                }
            }
        };
        if self.judge_rows {
            for (r, row) in self.rows.iter().enumerate() {
                for i in 0..row.cells.len() {
                    for j in i + 1..row.cells.len() {
                        consider((r, i), (r, j));
                    }
                }
            }
        }
        if self.judge_columns {
            for c in 0..self.columns.len() {
                for i in 0..self.rows.len() {
                    for j in i + 1..self.rows.len() {
                        consider((i, c), (j, c));
                    }
                }
            }
        }
        out
    }

    pub fn verdict(&self) -> Verdict {
        let mut v = Verdict {
            pairs: 0,
            pairs_in_order: 0,
            values: 0,
            within_2x: 0,
        };
        for c in self.rows.iter().flat_map(|r| &r.cells) {
            if c.published.is_some() {
                v.values += 1;
                v.within_2x += usize::from(c.within() == Some(true));
            }
        }
        for p in self.pairs() {
            v.pairs += 1;
            v.pairs_in_order += usize::from(p.in_order);
        }
        v
    }

    /// The policies with published figures, smallest first, by `key`
    /// (single-figure tables).
    fn ranking(&self, key: impl Fn(&Cell) -> Option<f64>) -> String {
        let mut rows: Vec<(&str, f64)> = self
            .rows
            .iter()
            .filter_map(|r| Some((r.label.as_str(), r.cells.first()?)))
            .filter(|(_, c)| c.published.is_some())
            .filter_map(|(l, c)| Some((l, key(c)?)))
            .collect();
        rows.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
        rows.iter().map(|r| r.0).collect::<Vec<_>>().join(" < ")
    }

    /// A cell's name in a grid: `row, column`.
    fn cell_name(&self, (r, c): (usize, usize)) -> String {
        format!("{} {}", self.rows[r].label, self.columns[c].label)
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
    /// Tables whose published figures order some pair of cells.
    pub tables: usize,
    /// Of those, the tables we order alike in every such pair.
    pub ordered: usize,
    /// Pairs of cells the published figures order, in every table.
    pub pairs: usize,
    /// Of those, the pairs we order alike.
    pub pairs_in_order: usize,
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
            pairs: verdicts.iter().map(|v| v.pairs).sum(),
            pairs_in_order: verdicts.iter().map(|v| v.pairs_in_order).sum(),
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
    /// Keep what the HTML report charts (latency CDFs, throughput
    /// timelines) for every scenario run; the letter's 88 runs are tables.
    pub charts: bool,
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
        .filter(|n| {
            crate::builtin(n)
                .is_some_and(|s| s.is_ok_and(|s| !s.published.is_empty() || !s.tables.is_empty()))
        })
        .map(str::to_string)
        .collect();
    for d in LetterOptions::default().devices {
        names.push(letter_name(&d));
    }
    names
}

/// The threads whose tables the built-in scenarios carry (`[[table]]
/// thread`), in the order of the experiments.
pub fn threads() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in experiments() {
        for t in thread_tags(&name) {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}

fn thread_tags(experiment: &str) -> Vec<String> {
    match crate::builtin(experiment) {
        Some(Ok(s)) => s.tables.iter().map(|t| t.thread.clone()).collect(),
        _ => Vec::new(),
    }
}

/// Whether `--only pattern` selects `experiment`: its name or one of its
/// tables' threads contains the pattern.
fn selected(experiment: &str, pattern: &str) -> bool {
    experiment.contains(pattern) || thread_tags(experiment).iter().any(|t| t.contains(pattern))
}

/// One piece of work.
enum Work {
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
            Some(p) => selected(n, p),
            None => true,
        })
        .collect();
    if chosen.is_empty() {
        return Err(cli(format!(
            "--only {:?} matches no experiment (known: {}; threads: {})",
            options.only.as_deref().unwrap_or(""),
            experiments().join(", "),
            threads().join(", ")
        )));
    }
    let mut scenarios: Vec<Scenario> = Vec::new();
    let mut units = Vec::new();
    for name in &chosen {
        if let Some(device) = name.strip_prefix(&letter_name("")) {
            units.push(Work::Letter {
                device: device.to_string(),
            });
            continue;
        }
        let s = crate::builtin(name).expect("listed built-in")?;
        // A scenario with only `[[table]]`s shows no policy its cells do
        // not name: those runs would be thrown away.
        let needed = |p: &String| {
            !s.published.is_empty()
                || s.tables
                    .iter()
                    .any(|t| t.cells.iter().flatten().any(|c| &c.policy == p))
        };
        for policy in s.schedulers.iter().filter(|p| needed(p)) {
            units.push(Work::Policy {
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
            (Work::Policy { scenario, .. }, Done::Policy(r)) => match reports.get_mut(scenario) {
                Some(all) => all.runs.extend(r.runs),
                None => {
                    reports.insert(*scenario, r);
                }
            },
            (Work::Letter { .. }, Done::Letter(l)) => tables.extend(letter_tables(&l)),
            _ => unreachable!("each unit gives its own kind"),
        }
    }
    // The single-figure tables first (the 2003 and 2016 ones, as before),
    // then the `[[table]]`s by thread, each thread's in scenario order.
    let mut scenario_tables: Vec<Table> = reports
        .iter()
        .filter(|(i, _)| !scenarios[**i].published.is_empty())
        .map(|(i, r)| scenario_table(&scenarios[*i], r, &options.tunables))
        .collect();
    scenario_tables.append(&mut tables);
    let mut grids: Vec<Table> = reports
        .iter()
        .flat_map(|(i, r)| {
            let s = &scenarios[*i];
            let settings = settings(s, r, &options.tunables);
            s.tables
                .iter()
                .map(move |t| t.table(&s.name, r, settings.clone()))
        })
        .collect();
    grids.sort_by(|a, b| a.family.cmp(&b.family));
    scenario_tables.append(&mut grids);
    Ok(Reproduction {
        tables: scenario_tables,
        reports: reports.into_values().collect(),
        jobs,
    })
}

/// Run `units` on `jobs` threads; the results come back in the units' order.
fn run_units(
    units: &[Work],
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
            Work::Policy { scenario, policy } => {
                let s = &scenarios[*scenario];
                let opts = RunOptions {
                    schedulers: Some(vec![policy.clone()]),
                    device: options.device.clone(),
                    seed: None,
                    tunables: options.tunables.clone(),
                    trace: false,
                    charts: options.charts,
                    clock: None,
                    check: false,
                };
                let r = run(s, &opts, &mut |_| {}).map(Done::Policy);
                (r, format!("{} {policy}", s.name))
            }
            Work::Letter { device } => {
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
fn weight(unit: &Work, scenarios: &[Scenario]) -> u64 {
    match unit {
        Work::Letter { .. } => 3,
        Work::Policy { scenario, policy } => {
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
        source: String::new(),
        judge_rows: false,
        judge_columns: true,
        columns: vec![Column {
            label: s.result.name.clone(),
        }],
        rows,
    }
}

fn scenario_row(s: &Scenario, r: &RunReport) -> Row {
    Row::single(
        r.label(),
        Cell {
            ours: r.result.value.is_finite().then_some(r.result.value),
            ours_at_least: r.result.cut,
            published: r.published.as_deref().and_then(Figure::parse),
            unit: s.result.unit.clone(),
            tie: 0.0,
        },
    )
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
                source: String::new(),
                judge_rows: false,
                judge_columns: true,
                columns: vec![Column {
                    label: "aggregate throughput".into(),
                }],
                rows: report
                    .schedulers
                    .iter()
                    .map(|s| {
                        Row::single(
                            s.clone(),
                            Cell {
                                ours: d.throughput(bg, s),
                                ours_at_least: false,
                                published: figure("throughput", bg, s),
                                unit: "MiB/s".into(),
                                tie: 0.0,
                            },
                        )
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
                    source: String::new(),
                    judge_rows: false,
                    judge_columns: true,
                    columns: vec![Column {
                        label: "start-up time".into(),
                    }],
                    rows: report
                        .schedulers
                        .iter()
                        .map(|s| {
                            let v = d.startup.get(&(bg, row.to_string(), s.clone()));
                            Row::single(
                                s.clone(),
                                Cell {
                                    // Past the letter's timeout: at least that.
                                    ours: v.map(|v| v.unwrap_or(letter::TIMEOUT_S)),
                                    ours_at_least: matches!(v, Some(None)),
                                    published: figure(row, bg, s),
                                    unit: "s".into(),
                                    tie: 0.0,
                                },
                            )
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
            if t.is_single() {
                single_text(&mut out, t);
            } else {
                grid_text(&mut out, t);
            }
            let _ = writeln!(out, "{}", wrap(&t.settings, WIDTH, "  settings: "));
            let _ = writeln!(out);
        }
        let s = self.summary();
        let _ = writeln!(
            out,
            "summary: orderings matched {}/{} tables ({}/{} pairs), {}/{} values within 2x of \
             the published",
            s.ordered, s.tables, s.pairs_in_order, s.pairs, s.within_2x, s.values
        );
        out
    }

    /// The README's tables: per family of single-figure tables, one row
    /// per table, ours with the published figure in brackets, and the
    /// verdict; per thread, each `[[table]]` as a grid of the same cells.
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
            let (single, grids): (Vec<&Table>, Vec<&Table>) =
                tables.into_iter().partition(|t| t.is_single());
            if !single.is_empty() {
                let _ = writeln!(out, "#### {family}\n");
                family_markdown(&mut out, &single);
            }
            if !grids.is_empty() {
                let _ = writeln!(out, "#### Thread {family}\n");
                for t in grids {
                    grid_markdown(&mut out, t);
                }
            }
        }
        let s = self.summary();
        let _ = writeln!(
            out,
            "Orderings matched in {}/{} tables ({}/{} pairs of figures that differ by more than \
             {:.0} %); {}/{} of our figures within 2× of the published ones.",
            s.ordered,
            s.tables,
            s.pairs_in_order,
            s.pairs,
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

/// A single-figure table: a line per policy.
fn single_text(out: &mut String, t: &Table) {
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
        let Some(c) = r.cells.first() else { continue };
        let p = c.published.as_ref();
        rows.push(vec![
            r.label.clone(),
            c.ours_text(),
            p.map_or("-".into(), Figure::number),
            c.ratio().map_or("-".into(), |x| format!("{x:.2}")),
            c.within()
                .map_or("-", |w| if w { "yes" } else { "no" })
                .into(),
            p.map_or(String::new(), |p| p.source().to_string()),
        ]);
    }
    columns(out, &rows);
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
            let published = t.ranking(|c| c.published.as_ref().map(Figure::mid));
            let ours = t.ranking(|c| c.ours);
            let _ = writeln!(out, "{}", wrap(&published, WIDTH, "    published: "));
            let _ = writeln!(out, "{}", wrap(&ours, WIDTH, "    ours:      "));
        }
    } else {
        let _ = writeln!(out, "  verdict: no published figure to compare with");
    }
}

/// The unit shared by every cell of `cells`, if one.
fn shared_unit<'a>(mut cells: impl Iterator<Item = &'a Cell>) -> Option<&'a str> {
    let first = cells.next()?.unit.as_str();
    cells.all(|c| c.unit == first).then_some(first)
}

/// Headings with their units: a column's unit in its heading when all its
/// cells share it, else a row's in the row's label.
fn headings(t: &Table) -> (Vec<String>, Vec<String>) {
    let column_units: Vec<Option<&str>> = (0..t.columns.len())
        .map(|c| shared_unit(t.rows.iter().filter_map(|r| r.cells.get(c))))
        .collect();
    let by_column = column_units.iter().all(Option::is_some);
    let columns = t
        .columns
        .iter()
        .zip(&column_units)
        .map(|(c, u)| match u {
            Some(u) if by_column && !u.is_empty() => format!("{} ({u})", c.label),
            _ => c.label.clone(),
        })
        .collect();
    let rows = t
        .rows
        .iter()
        .map(|r| match shared_unit(r.cells.iter()) {
            Some(u) if !by_column && !u.is_empty() => format!("{} ({u})", r.label),
            _ => r.label.clone(),
        })
        .collect();
    (columns, rows)
}

/// Column groups packed into as few chunks as fit `width` (`lead`: the
/// width of what starts each line, `widths`: each group's), as even in
/// their number of groups as will fit: four columns that need two chunks
/// print two and two, not three and one.
fn chunks(lead: usize, widths: &[usize], width: usize) -> Vec<std::ops::Range<usize>> {
    let fits = |r: &std::ops::Range<usize>| {
        r.len() == 1 || lead + widths[r.clone()].iter().sum::<usize>() <= width
    };
    let n = widths.len();
    for k in 1..=n {
        let even: Vec<std::ops::Range<usize>> =
            (0..k).map(|i| i * n / k..(i + 1) * n / k).collect();
        if even.iter().all(fits) {
            return even;
        }
    }
    (0..n).map(|i| i..i + 1).collect()
}

/// A ratio as printed in a grid: two decimals, or two significant
/// digits below 0.1, whole from 100; `*` marks one outside 2×.
pub fn ratio_text(c: &Cell) -> String {
    let Some(x) = c.ratio() else {
        return "-".into();
    };
    let text = if x >= 100.0 {
        format!("{x:.0}")
    } else if x > 0.0 && x < 0.1 {
        let decimals = (1 - x.log10().floor() as i32).clamp(2, 9) as usize;
        format!("{x:.decimals$}")
    } else {
        format!("{x:.2}")
    };
    match c.within() {
        Some(false) => format!("{text}*"),
        _ => text,
    }
}

/// A `[[table]]`: per column ours, the published figure as written and
/// the ratio, split into chunks of columns that fit the width; then the
/// verdict and the pairs we order otherwise.
fn grid_text(out: &mut String, t: &Table) {
    let _ = writeln!(out, "{}", wrap(&t.title, WIDTH, ""));
    let _ = writeln!(out, "{}", wrap(&t.source, WIDTH, "source: "));
    let (column_heads, row_heads) = headings(t);
    let texts: Vec<Vec<[String; 3]>> = t
        .rows
        .iter()
        .map(|r| {
            r.cells
                .iter()
                .map(|c| {
                    [
                        c.ours_sig(),
                        c.published.as_ref().map_or("-".into(), Figure::number),
                        ratio_text(c),
                    ]
                })
                .collect()
        })
        .collect();
    const SUB: [&str; 3] = ["ours", "published", "ratio"];
    let sub_widths: Vec<[usize; 3]> = (0..t.columns.len())
        .map(|c| {
            let mut w = SUB.map(str::len);
            for row in &texts {
                if let Some(cell) = row.get(c) {
                    for k in 0..3 {
                        w[k] = w[k].max(cell[k].chars().count());
                    }
                }
            }
            // A heading wider than its three figures widens the last.
            let inner = w[0] + w[1] + w[2] + 4;
            let head = column_heads[c].chars().count();
            if head > inner {
                w[2] += head - inner;
            }
            w
        })
        .collect();
    let label_w = row_heads
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let group_w: Vec<usize> = sub_widths
        .iter()
        .map(|w| w[0] + w[1] + w[2] + 4 + 3)
        .collect();
    for range in chunks(2 + label_w, &group_w, WIDTH) {
        let mut head = format!("  {:label_w$}", "");
        let mut sub = format!("  {:label_w$}", "");
        for c in range.clone() {
            let w = sub_widths[c];
            let inner = w[0] + w[1] + w[2] + 4;
            let _ = write!(head, "   {:<inner$}", column_heads[c]);
            let _ = write!(
                sub,
                "   {:<a$}  {:<b$}  {:<r$}",
                SUB[0],
                SUB[1],
                SUB[2],
                a = w[0],
                b = w[1],
                r = w[2]
            );
        }
        let _ = writeln!(out, "{}", head.trim_end());
        let _ = writeln!(out, "{}", sub.trim_end());
        for (r, row) in texts.iter().enumerate() {
            let mut line = format!("  {:<label_w$}", row_heads[r]);
            for c in range.clone() {
                let w = sub_widths[c];
                let empty = [String::new(), String::new(), String::new()];
                let cell = row.get(c).unwrap_or(&empty);
                let _ = write!(
                    line,
                    "   {:<a$}  {:<b$}  {:<r$}",
                    cell[0],
                    cell[1],
                    cell[2],
                    a = w[0],
                    b = w[1],
                    r = w[2]
                );
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    let v = t.verdict();
    let judged = match (t.judge_rows, t.judge_columns) {
        (true, true) => "within rows and columns",
        (true, false) => "within rows",
        _ => "within columns",
    };
    let _ = writeln!(
        out,
        "{}",
        wrap(
            &format!(
                "{}; {}/{} within 2x (* marks a ratio outside)",
                if v.pairs == 0 {
                    format!("the published figures tie ({judged})")
                } else {
                    format!(
                        "{}/{} pairs in the published order ({judged})",
                        v.pairs_in_order, v.pairs
                    )
                },
                v.within_2x,
                v.values
            ),
            WIDTH,
            "  verdict: "
        )
    );
    let wrong: Vec<Pair> = t.pairs().into_iter().filter(|p| !p.in_order).collect();
    for p in wrong.iter().take(MAX_LISTED) {
        let _ = writeln!(out, "{}", wrap(&pair_text(t, p), WIDTH, "    otherwise: "));
    }
    if wrong.len() > MAX_LISTED {
        let _ = writeln!(
            out,
            "    ... and {} more pairs ordered otherwise",
            wrong.len() - MAX_LISTED
        );
    }
}

/// How many pairs ordered otherwise a grid lists.
const MAX_LISTED: usize = 5;

/// `rt1 read < rt0 read published, > ours` as a sentence.
fn pair_text(t: &Table, p: &Pair) -> String {
    let cell = |(r, c): (usize, usize)| &t.rows[r].cells[c];
    let (a, b) = (cell(p.a), cell(p.b));
    let sign = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => match order((x, false), (y, false), a.tie.min(b.tie)) {
            Some(std::cmp::Ordering::Less) => "<",
            Some(std::cmp::Ordering::Greater) => ">",
            _ => "~",
        },
        _ => "?",
    };
    let mid = |c: &Cell| c.published.as_ref().map(Figure::mid);
    format!(
        "{} vs {}: published {} {} {}, ours {} {} {}",
        t.cell_name(p.a),
        t.cell_name(p.b),
        a.published.as_ref().map_or("-".into(), Figure::number),
        sign(mid(a), mid(b)),
        b.published.as_ref().map_or("-".into(), Figure::number),
        a.ours_sig(),
        sign(a.ours, b.ours),
        b.ours_sig()
    )
}

/// A family of single-figure tables as one markdown table.
fn family_markdown(out: &mut String, tables: &[&Table]) {
    let mut policies: Vec<&str> = Vec::new();
    for t in tables {
        for r in &t.rows {
            if !policies.contains(&r.label.as_str()) {
                policies.push(&r.label);
            }
        }
    }
    let _ = writeln!(out, "| | {} | order | within 2× |", policies.join(" | "));
    let _ = writeln!(out, "|---{}|---|---|", "|---".repeat(policies.len()));
    for t in tables {
        let mut cells = vec![t.short.replace('|', "\\|")];
        for p in &policies {
            cells.push(
                match t
                    .rows
                    .iter()
                    .find(|r| r.label == *p)
                    .and_then(|r| r.cells.first())
                {
                    Some(c) => match &c.published {
                        Some(f) => format!("{} ({})", c.ours_text(), f.number()),
                        None => c.ours_text(),
                    },
                    None => "".into(),
                },
            );
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

/// A `[[table]]` in markdown: ours with the published figure in brackets,
/// columns split into tables whose lines fit [`WIDTH`].
fn grid_markdown(out: &mut String, t: &Table) {
    // `__2.6.32-rc5__` would be bold, `|` a cell's end.
    let esc = |s: &str| s.replace('|', "\\|").replace('_', "\\_");
    // A heading cannot wrap: the id heads, the title follows wrapped.
    let title = t
        .title
        .strip_prefix(&format!("{}: ", t.id))
        .unwrap_or(&t.title);
    let _ = writeln!(out, "##### {}\n", esc(&t.id));
    let _ = writeln!(out, "{}\n", wrap(&esc(title), WIDTH, ""));
    let _ = writeln!(
        out,
        "{}\n",
        wrap(&format!("Source: {}", esc(&t.source)), WIDTH, "")
    );
    let (column_heads, row_heads) = headings(t);
    let texts: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            r.cells
                .iter()
                .map(|c| match &c.published {
                    Some(f) => format!("{} ({})", c.ours_sig(), esc(&f.number())),
                    None => c.ours_sig(),
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..t.columns.len())
        .map(|c| {
            texts
                .iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .chain([column_heads[c].chars().count()])
                .max()
                .unwrap_or(0)
                + 3
        })
        .collect();
    let label_w = row_heads
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    for range in chunks(label_w + 4, &widths, WIDTH) {
        let heads: Vec<String> = range.clone().map(|c| esc(&column_heads[c])).collect();
        let _ = writeln!(out, "| | {} |", heads.join(" | "));
        let _ = writeln!(out, "|---{}|", "|---".repeat(range.len()));
        for (r, row) in texts.iter().enumerate() {
            let cells: Vec<&str> = range
                .clone()
                .map(|c| row.get(c).map_or("", String::as_str))
                .collect();
            let _ = writeln!(out, "| {} | {} |", esc(&row_heads[r]), cells.join(" | "));
        }
        let _ = writeln!(out);
    }
    let v = t.verdict();
    let _ = writeln!(
        out,
        "{}\n",
        wrap(
            &format!(
                "Verdict: {}, {}/{} of ours within 2×; {}.",
                if v.pairs == 0 {
                    "the published figures tie".to_string()
                } else {
                    format!(
                        "{}/{} pairs in the published order",
                        v.pairs_in_order, v.pairs
                    )
                },
                v.within_2x,
                v.values,
                esc(&t.settings)
            ),
            WIDTH,
            ""
        )
    );
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

    fn cell(ours: f64, published: &str) -> Cell {
        Cell {
            ours: Some(ours),
            ours_at_least: false,
            published: Figure::parse(published),
            unit: "s".into(),
            tie: 0.0,
        }
    }

    fn row(label: &str, ours: f64, published: &str) -> Row {
        Row::single(label.into(), cell(ours, published))
    }

    fn table(rows: Vec<Row>) -> Table {
        Table {
            id: "t".into(),
            family: "f".into(),
            short: "t".into(),
            title: "t".into(),
            measure: "m".into(),
            unit: "s".into(),
            settings: String::new(),
            source: String::new(),
            judge_rows: false,
            judge_columns: true,
            columns: vec![Column { label: "m".into() }],
            rows,
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
    fn figures_with_written_units_read_in_the_cells_unit() {
        let ms = Unit::named("ms").unwrap();
        let f = Figure::parse_in("132K usec", &ms).unwrap();
        assert_eq!((f.low, f.number().as_str()), (132.0, "132K usec"));
        assert_eq!(Figure::parse_in("2820 msec", &ms).unwrap().low, 2820.0);
        assert_eq!(Figure::parse_in("20529 usec", &ms).unwrap().low, 20.529);
        let f = Figure::parse_in("> 60 s", &ms).unwrap();
        assert_eq!(
            (f.low, f.at_least, f.number().as_str()),
            (60e3, true, "> 60 s")
        );
        let kib_s = Unit::named("KiB/s").unwrap();
        assert_eq!(Figure::parse_in("5551KB/s", &kib_s).unwrap().low, 5551.0);
        assert!(Figure::parse_in("5551KB/s", &ms).is_err());
        assert!(Figure::parse_in("killed", &ms).is_err());
        // A list's statistic is one of its samples, as written.
        let s = Unit::named("s").unwrap();
        let list: Vec<String> = ["0.0288", "0.0528", "0.5720", "0.0294"]
            .map(String::from)
            .to_vec();
        let median = Figure::of_samples(&list, CallStat::Median, &s).unwrap();
        assert_eq!(
            (median.low, median.text.as_str()),
            (0.0294, "0.0294 (median of 4)")
        );
        assert_eq!(median.number(), "0.0294");
        assert_eq!(
            Figure::of_samples(&list, CallStat::Max, &s).unwrap().low,
            0.572
        );
        assert_eq!(
            Figure::of_samples(&list, CallStat::Count, &s).unwrap().low,
            4.0
        );
    }

    #[test]
    fn within_two_times_honours_ranges_and_bounds() {
        assert_eq!(cell(260.0, "132.0-133.5").within(), Some(true));
        assert_eq!(cell(270.0, "132.0-133.5").within(), Some(false));
        assert_eq!(cell(60.0, "132.0-133.5").within(), Some(false));
        assert_eq!(cell(500.0, "> 900").within(), Some(true));
        assert_eq!(cell(400.0, "> 900").within(), Some(false));
        let mut cut = cell(60.0, "1.91");
        cut.ours_at_least = true;
        assert_eq!(cut.within(), Some(false));
        let mut cut = cell(60.0, ">60");
        cut.ours_at_least = true;
        assert_eq!(cut.within(), Some(true));
        assert_eq!(cell(1.0, "").within(), None);
        // Within the table's resolution counts too: 4 KiB against 24.
        let mut few = cell(4.0, "24");
        assert_eq!(few.within(), Some(false));
        few.tie = 64.0;
        assert_eq!(few.within(), Some(true));
    }

    #[test]
    fn verdict_counts_pairs_the_published_figures_order() {
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

    /// A hand-made grid: two processes by two kernels, read and write in
    /// KiB, with a resolution of 16 KiB. Published: rt0 > rt1 in every
    /// column, rt1 patched > rt1 unpatched; the rest tie.
    fn grid(ours: [[f64; 2]; 3]) -> Table {
        let published = [["300", "900"], ["100", "800"], ["20", "28"]];
        let labels = ["rt0", "rt1", "be0"];
        Table {
            source: "a hand-made thread".into(),
            judge_rows: true,
            columns: vec![
                Column {
                    label: "unpatched".into(),
                },
                Column {
                    label: "patched".into(),
                },
            ],
            rows: (0..3)
                .map(|r| Row {
                    label: labels[r].into(),
                    cells: (0..2)
                        .map(|c| Cell {
                            ours: Some(ours[r][c]),
                            ours_at_least: false,
                            published: Figure::parse(published[r][c]),
                            unit: "KiB".into(),
                            tie: 16.0,
                        })
                        .collect(),
                })
                .collect(),
            ..table(Vec::new())
        }
    }

    #[test]
    fn a_grid_is_judged_within_rows_and_columns_and_can_fail() {
        // Rows: rt0 300 < 900, rt1 100 < 800, be0 20 ~ 28 (within 16 KiB).
        // Columns: 300 > 100, 300 > 20, 100 > 20; 900 ~ 800 (11 %), 900 >
        // 28, 800 > 28. Eight pairs.
        let good = grid([[310.0, 950.0], [90.0, 700.0], [8.0, 20.0]]);
        let v = good.verdict();
        assert_eq!((v.pairs, v.pairs_in_order), (8, 8));
        assert_eq!(
            (v.values, v.within_2x),
            (6, 6),
            "be0's 8 and 20 are within 16 KiB"
        );
        assert!(good.pairs().iter().all(|p| p.in_order));
        // rt1 above rt0 unpatched and no gain from the patch for rt1.
        let bad = grid([[100.0, 950.0], [300.0, 280.0], [8.0, 20.0]]);
        let v = bad.verdict();
        assert_eq!(v.pairs, 8);
        assert_eq!(v.pairs_in_order, 6, "{:?}", bad.pairs());
        assert_eq!(
            v.within_2x, 3,
            "rt0 and rt1 unpatched are 3x off, rt1 patched 2.9x"
        );
        // Judged within rows only, the columns' pairs drop out.
        let rows_only = Table {
            judge_columns: false,
            ..bad.clone()
        };
        assert_eq!(rows_only.verdict().pairs, 2);
        // The text lists what we order otherwise and fits the width.
        let r = Reproduction {
            tables: vec![bad],
            reports: Vec::new(),
            jobs: 1,
        };
        let text = r.to_text();
        assert!(text.contains("6/8 pairs in the published order"), "{text}");
        assert!(
            text.contains("rt0 unpatched vs rt1 unpatched: published 300 > 100, ours 100 < 300"),
            "{text}"
        );
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        let md = r.to_markdown();
        assert!(md.contains("| rt0 | 100 (300) | 950 (900) |"), "{md}");
    }

    #[test]
    fn a_wide_grid_splits_into_chunks_that_fit() {
        let widths = [30, 30, 30, 30];
        assert_eq!(chunks(10, &widths, 100), vec![0..2, 2..4]);
        assert_eq!(chunks(10, &[30, 30, 30, 30, 30], 100), vec![0..2, 2..5]);
        assert_eq!(chunks(10, &[200], 100), vec![0..1]);
        assert_eq!(chunks(10, &[30, 30], 100), vec![0..2]);
    }

    #[test]
    fn check_flags_a_table_that_got_worse_and_one_never_blessed() {
        let t = table(vec![row("a", 1.0, "1"), row("b", 3.0, "3")]);
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
        worse.tables[0].rows[1].cells[0].ours = Some(0.5);
        let problems = committed.check(&worse);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(Expectations::default().check(&good)[0].contains("no committed verdict"));
    }
}
