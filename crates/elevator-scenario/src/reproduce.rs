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

mod render;

pub use render::ratio_text;

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
        // A built-in that does not parse stays in, so that running it
        // reports the error instead of dropping its tables unseen.
        .filter(|n| {
            crate::builtin(n).is_some_and(|s| {
                s.as_ref()
                    .map_or(true, |s| !s.published.is_empty() || !s.tables.is_empty())
            })
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
    let cli = |m: String| ScenarioError::command_line(Some("only"), m);
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

    /// One line per committed table that a whole run (no `--only`) did
    /// not produce: a scenario that stopped parsing, or lost its
    /// `[[table]]`, must not pass the check by vanishing.
    pub fn missing(&self, r: &Reproduction) -> Vec<String> {
        let ran: std::collections::BTreeSet<&str> =
            r.tables.iter().map(|t| t.id.as_str()).collect();
        self.tables
            .keys()
            .filter(|id| !ran.contains(id.as_str()))
            .map(|id| format!("{id}: committed but not in this run"))
            .collect()
    }
}

#[cfg(test)]
mod tests;
