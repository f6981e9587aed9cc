//! `[[table]]`: a published table of any shape, transcribed from its
//! thread, with the cell of our runs each figure is compared with.
//!
//! The single-figure `[published]` map (policy -> figure) fits the 2003
//! and 2016 tables, one number per policy. The 2009 threads print grids:
//! processes by kernels by direction (Brunelle), program phases and
//! metrics by policy (Zoccolo), sweep points by group and metric (Goyal,
//! Righi), lists of samples per policy (Zoccolo's fsync-tester). A
//! `[[table]]` describes any of them the same way:
//!
//! - a table, each of its `columns` and each of its `rows` is a partial
//!   *selector*: `policy`, `sweep` (a point of the scenario's `[sweep]`),
//!   `job` or `group`, `metric` (as `[result]`'s, plus `read_bytes`,
//!   `write_bytes`, `bytes` and `call:CALL:STAT`), `reduce` and `unit`;
//! - a cell's selector is its row's and its column's together over the
//!   table's (a key set by both the row and the column is an error);
//! - the published figures are written on the rows (`figures`, one string
//!   per column, as the thread wrote them, units and all, `""` for none),
//!   or as the thread's list of samples on a row or column (`samples`),
//!   of which the cell's `call:CALL:STAT` statistic is the figure;
//! - `judge` says whether cells are ordered within rows, within columns
//!   or both, and `resolution` below which two figures tie whatever their
//!   ratio (counts of a few requests).
//!
//! Everything is checked when the scenario is parsed; errors name the
//! file, the line and the key (`table.rows.job`).

use crate::ctx::Ctx;
use crate::error::ScenarioError;
use crate::quantity::{unit_names, Unit};
use crate::reproduce::{Cell, Column, Figure, Row, Table};
use crate::result::{Metric, Reduce, ResultSpec};
use crate::sweep::Sweep;
use elevator_core::{GroupTree, Instant};
use elevator_metrics::{Report, RunReport};
use serde::Deserialize;
use toml::Spanned;

type S<T> = Spanned<T>;

/// A row or a column.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAxis {
    label: S<String>,
    policy: Option<S<String>>,
    sweep: Option<S<toml::Value>>,
    job: Option<S<String>>,
    group: Option<S<String>>,
    metric: Option<S<String>>,
    reduce: Option<S<String>>,
    unit: Option<S<String>>,
    figures: Option<S<Vec<String>>>,
    samples: Option<S<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTable {
    name: S<String>,
    thread: S<String>,
    title: S<String>,
    source: S<String>,
    policy: Option<S<String>>,
    sweep: Option<S<toml::Value>>,
    job: Option<S<String>>,
    group: Option<S<String>>,
    metric: Option<S<String>>,
    reduce: Option<S<String>>,
    unit: Option<S<String>>,
    judge: Option<S<Vec<String>>>,
    resolution: Option<S<String>>,
    columns: Vec<S<RawAxis>>,
    rows: Vec<S<RawAxis>>,
}

impl RawAxis {
    fn select(&self) -> RawSelectRef<'_> {
        RawSelectRef {
            policy: self.policy.as_ref(),
            sweep: self.sweep.as_ref(),
            job: self.job.as_ref(),
            group: self.group.as_ref(),
            metric: self.metric.as_ref(),
            reduce: self.reduce.as_ref(),
            unit: self.unit.as_ref(),
        }
    }
}

impl RawTable {
    fn select(&self) -> RawSelectRef<'_> {
        RawSelectRef {
            policy: self.policy.as_ref(),
            sweep: self.sweep.as_ref(),
            job: self.job.as_ref(),
            group: self.group.as_ref(),
            metric: self.metric.as_ref(),
            reduce: self.reduce.as_ref(),
            unit: self.unit.as_ref(),
        }
    }
}

/// A selector's keys with where they were written.
/// (The three sections spell the keys out so that `deny_unknown_fields`
/// names a stray key: serde cannot flatten with it.)
#[derive(Clone, Copy)]
struct RawSelectRef<'a> {
    policy: Option<&'a S<String>>,
    sweep: Option<&'a S<toml::Value>>,
    job: Option<&'a S<String>>,
    group: Option<&'a S<String>>,
    metric: Option<&'a S<String>>,
    reduce: Option<&'a S<String>>,
    unit: Option<&'a S<String>>,
}

/// One key of a row and a column together: the row's or the column's, an
/// error if both, else the table's.
fn merge<'a, T>(
    cx: &Ctx<'_>,
    key: &str,
    row: Option<&'a S<T>>,
    column: Option<&'a S<T>>,
    column_label: &str,
    table: Option<&'a S<T>>,
) -> Result<Option<&'a S<T>>, ScenarioError> {
    match (row, column) {
        (Some(r), Some(_)) => Err(cx.at(
            r,
            &format!("table.rows.{key}"),
            format!("set by column {column_label:?} too: a cell's `{key}` comes from one of them"),
        )),
        (Some(r), None) => Ok(Some(r)),
        (None, Some(c)) => Ok(Some(c)),
        (None, None) => Ok(table),
    }
}

/// A validated `[[table]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSpec {
    /// Unique within the scenario; the table's id is `SCENARIO/NAME`.
    pub name: String,
    /// The thread it comes from (`brunelle-2009`): `reproduce --only`
    /// matches it, and the README groups tables by it.
    pub thread: String,
    pub title: String,
    /// Where in the thread the figures are.
    pub source: String,
    pub judge_rows: bool,
    pub judge_columns: bool,
    pub columns: Vec<String>,
    pub rows: Vec<String>,
    /// `[row][column]`.
    pub cells: Vec<Vec<CellSpec>>,
}

/// What one cell compares: a figure of one run, in the cell's unit.
#[derive(Clone, Debug, PartialEq)]
pub struct CellSpec {
    pub policy: String,
    /// The sweep point (as the run's variant names it after `=`).
    pub sweep: Option<String>,
    pub select: ResultSpec,
    pub unit: Unit,
    /// The unit of our figure; `None`: an extra, taken as `unit`.
    pub native: Option<Unit>,
    pub published: Option<Figure>,
    /// The thread's list of samples `published` sums up, as written
    /// (empty for a written figure).
    pub samples: Vec<String>,
    /// Figures this close (in `unit`) tie.
    pub tie: f64,
}

/// What a table's cells may name in the scenario.
pub(crate) struct Known<'a> {
    pub schedulers: &'a [String],
    pub names: &'a [String],
    pub groups: &'a GroupTree,
    pub sweep: Option<&'a Sweep>,
}

/// The text after a sweep variant's `=` for each point of `sweep`.
pub fn sweep_points(sweep: &Sweep) -> Vec<String> {
    crate::run::variants_labels(sweep)
        .into_iter()
        .map(|l| point_of(&l).to_string())
        .collect()
}

/// The sweep point a run's variant label names (`rand=4` -> `4`).
fn point_of(variant: &str) -> &str {
    variant.split_once('=').map_or(variant, |(_, p)| p)
}

pub(crate) fn parse_tables(
    cx: &Ctx<'_>,
    raw: &[S<RawTable>],
    known: &Known<'_>,
) -> Result<Vec<TableSpec>, ScenarioError> {
    let mut out: Vec<TableSpec> = Vec::new();
    for t in raw {
        let spec = parse_table(cx, t, known)?;
        if out.iter().any(|o| o.name == spec.name) {
            let t = t.get_ref();
            return Err(cx.at(
                &t.name,
                "table.name",
                format!("{:?} names an earlier table too", spec.name),
            ));
        }
        out.push(spec);
    }
    Ok(out)
}

fn nonempty(cx: &Ctx<'_>, v: &S<String>, key: &str) -> Result<String, ScenarioError> {
    let s = v.get_ref().trim();
    if s.is_empty() {
        return Err(cx.at(v, key, "empty"));
    }
    Ok(s.to_string())
}

fn parse_table(
    cx: &Ctx<'_>,
    raw: &S<RawTable>,
    known: &Known<'_>,
) -> Result<TableSpec, ScenarioError> {
    let t = raw.get_ref();
    let name = nonempty(cx, &t.name, "table.name")?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(cx.at(
            &t.name,
            "table.name",
            format!("{name:?}: letters, digits, - and _ only (it names the table's id)"),
        ));
    }
    let thread = nonempty(cx, &t.thread, "table.thread")?;
    let title = nonempty(cx, &t.title, "table.title")?;
    let source = nonempty(cx, &t.source, "table.source")?;
    let (judge_rows, judge_columns) = match &t.judge {
        None => (true, true),
        Some(j) => {
            let mut rows = false;
            let mut columns = false;
            for w in j.get_ref() {
                match w.as_str() {
                    "rows" => rows = true,
                    "columns" => columns = true,
                    other => {
                        return Err(cx.at(
                            j,
                            "table.judge",
                            format!(
                                "{other:?}: judge lists \"rows\" (order the cells of each row) \
                                 and/or \"columns\" (of each column)"
                            ),
                        ))
                    }
                }
            }
            if !rows && !columns {
                return Err(cx.at(
                    j,
                    "table.judge",
                    "judges nothing: name rows, columns or both",
                ));
            }
            (rows, columns)
        }
    };
    if t.columns.is_empty() {
        return Err(cx.at(
            &t.name,
            "table.columns",
            "a table needs at least one column",
        ));
    }
    if t.rows.is_empty() {
        return Err(cx.at(&t.name, "table.rows", "a table needs at least one row"));
    }
    let mut columns = Vec::new();
    for c in &t.columns {
        let c = c.get_ref();
        if let Some(f) = &c.figures {
            return Err(cx.at(
                f,
                "table.columns.figures",
                "figures are written on the rows, one per column",
            ));
        }
        columns.push(nonempty(cx, &c.label, "table.columns.label")?);
    }
    let mut rows = Vec::new();
    let mut cells = Vec::new();
    for r in &t.rows {
        let row = r.get_ref();
        let label = nonempty(cx, &row.label, "table.rows.label")?;
        if let Some(f) = &row.figures {
            if f.get_ref().len() != columns.len() {
                return Err(cx.at(
                    f,
                    "table.rows.figures",
                    format!(
                        "{} figures for {} columns (write \"\" where the thread has none)",
                        f.get_ref().len(),
                        columns.len()
                    ),
                ));
            }
        }
        let mut line = Vec::new();
        for (k, c) in t.columns.iter().enumerate() {
            line.push(cell(cx, t, r, c.get_ref(), k, known)?);
        }
        rows.push(label);
        cells.push(line);
    }
    if let Some(res) = &t.resolution {
        let (value, suffix) = split_number(res.get_ref())
            .ok_or_else(|| cx.at(res, "table.resolution", "a number, with a unit if you like"))?;
        for c in cells.iter_mut().flatten() {
            let f = c
                .unit
                .factor_of_written(suffix)
                .map_err(|m| cx.at(res, "table.resolution", m))?;
            c.tie = value * f;
        }
    }
    if !cells.iter().flatten().any(|c| c.published.is_some()) {
        return Err(cx.at(
            &t.name,
            "table.rows.figures",
            "the table has no published figure",
        ));
    }
    Ok(TableSpec {
        name,
        thread,
        title,
        source,
        judge_rows,
        judge_columns,
        columns,
        rows,
        cells,
    })
}

/// The number at the start of `text` and what follows it.
fn split_number(text: &str) -> Option<(f64, &str)> {
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    Some((t[..end].parse().ok()?, &t[end..]))
}

fn cell(
    cx: &Ctx<'_>,
    t: &RawTable,
    row: &S<RawAxis>,
    column: &RawAxis,
    k: usize,
    known: &Known<'_>,
) -> Result<CellSpec, ScenarioError> {
    let r = row.get_ref();
    let (rs, cs, ts) = (r.select(), column.select(), t.select());
    let cl = column.label.get_ref().as_str();
    let policy = merge(cx, "policy", rs.policy, cs.policy, cl, ts.policy)?;
    let sweep = merge(cx, "sweep", rs.sweep, cs.sweep, cl, ts.sweep)?;
    let job = merge(cx, "job", rs.job, cs.job, cl, ts.job)?;
    let group = merge(cx, "group", rs.group, cs.group, cl, ts.group)?;
    let metric = merge(cx, "metric", rs.metric, cs.metric, cl, ts.metric)?;
    let reduce = merge(cx, "reduce", rs.reduce, cs.reduce, cl, ts.reduce)?;
    let unit = merge(cx, "unit", rs.unit, cs.unit, cl, ts.unit)?;
    let where_ = || format!("row {:?}, column {cl:?}", r.label.get_ref());
    // A cell without a key of its own is blamed on its row.
    let missing = |key: &str, m: String| cx.at(&r.label, &format!("table.rows.{key}"), m);

    let policy = match policy {
        Some(p) => {
            let t = elevator_sched::stack::find(p.get_ref())
                .filter(|t| known.schedulers.iter().any(|s| s == t.name));
            match t {
                Some(t) => t.name.to_string(),
                None => {
                    return Err(cx.at(
                        p,
                        "table.policy",
                        format!(
                            "{:?} is not one of the scenario's schedulers ({})",
                            p.get_ref(),
                            known.schedulers.join(", ")
                        ),
                    ))
                }
            }
        }
        None if known.schedulers.len() == 1 => known.schedulers[0].clone(),
        None => {
            return Err(missing(
                "policy",
                format!(
                    "{}: no policy for the cell (the scenario runs several)",
                    where_()
                ),
            ))
        }
    };
    let sweep = match (sweep, known.sweep) {
        (Some(v), Some(sw)) => {
            let point = match v.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                other => return Err(cx.at(v, "table.sweep", format!("{other}: a sweep point"))),
            };
            let points = sweep_points(sw);
            if !points.contains(&point) {
                return Err(cx.at(
                    v,
                    "table.sweep",
                    format!(
                        "{point:?} is no point of the [sweep] ({})",
                        points.join(", ")
                    ),
                ));
            }
            Some(point)
        }
        (Some(v), None) => {
            return Err(cx.at(v, "table.sweep", "the scenario has no [sweep]"));
        }
        (None, Some(_)) => {
            return Err(missing(
                "sweep",
                format!("{}: the scenario sweeps; name the cell's point", where_()),
            ))
        }
        (None, None) => None,
    };
    if let Some(j) = job {
        let name = j.get_ref();
        if !known.names.iter().any(|n| n == name) {
            return Err(cx.at(
                j,
                "table.job",
                format!(
                    "{name:?} names no job or process (known: {})",
                    known.names.join(", ")
                ),
            ));
        }
        if let Some(g) = group {
            return Err(cx.at(g, "table.group", "a cell names a job or a group, not both"));
        }
    }
    if let Some(g) = group {
        if known.groups.find(g.get_ref()).is_none() {
            return Err(cx.at(
                g,
                "table.group",
                format!("no group named {:?}", g.get_ref()),
            ));
        }
    }
    let Some(metric_v) = metric else {
        return Err(missing(
            "metric",
            format!("{}: no metric for the cell", where_()),
        ));
    };
    let metric: Metric = metric_v
        .get_ref()
        .parse()
        .map_err(|m| cx.at(metric_v, "table.metric", m))?;
    let whole_run = matches!(metric, Metric::AggregateMbS | Metric::SimulatedS);
    if job.is_none() && group.is_none() && !whole_run {
        return Err(missing(
            "job",
            format!(
                "{}: the metric {:?} needs a job or a group",
                where_(),
                metric_v.get_ref()
            ),
        ));
    }
    if group.is_some()
        && !matches!(
            metric,
            Metric::MbS
                | Metric::Iops
                | Metric::LatMeanMs
                | Metric::LatMaxMs
                | Metric::DiskShare
                | Metric::Bytes
        )
    {
        return Err(cx.at(
            metric_v,
            "table.metric",
            "a group's metric is mb_s, iops, lat_mean_ms, lat_max_ms, disk_share or bytes",
        ));
    }
    let native = metric
        .native_unit()
        .map(|n| Unit::named(n).expect("a known unit"));
    let unit = match (unit, native) {
        (Some(u), _) => {
            let named = Unit::named(u.get_ref()).ok_or_else(|| {
                cx.at(
                    u,
                    "table.unit",
                    format!("unknown unit {:?} (known: {})", u.get_ref(), unit_names()),
                )
            })?;
            if let Some(n) = native {
                if n.dim != named.dim {
                    return Err(cx.at(
                        u,
                        "table.unit",
                        format!(
                            "{}: the metric {:?} comes in {}, which does not convert to {}",
                            where_(),
                            metric_v.get_ref(),
                            n.name,
                            named.name
                        ),
                    ));
                }
            }
            named
        }
        (None, Some(n)) => n,
        (None, None) => {
            return Err(missing(
                "unit",
                format!(
                    "{}: an extra's unit is what its program says; give it",
                    where_()
                ),
            ))
        }
    };
    let reduce = match reduce {
        Some(x) => Some(
            x.get_ref()
                .parse::<Reduce>()
                .map_err(|m| cx.at(x, "table.reduce", m))?,
        ),
        None => None,
    };
    let default_reduce = match metric {
        Metric::MbS | Metric::Iops | Metric::ReadBytes | Metric::WriteBytes | Metric::Bytes => {
            Reduce::Sum
        }
        _ => Reduce::Max,
    };
    let select = ResultSpec {
        name: String::new(),
        unit: unit.name.to_string(),
        metric: metric.clone(),
        job: job.map(|j| j.get_ref().clone()),
        group: group.map(|g| g.get_ref().clone()),
        reduce: reduce.unwrap_or(default_reduce),
    };

    // The published figure: written on the row, or a statistic of the
    // samples on the row or the column.
    let written = r
        .figures
        .as_ref()
        .map(|f| (f, f.get_ref()[k].trim()))
        .filter(|(_, text)| !text.is_empty() && *text != "-");
    let samples = match (&r.samples, &column.samples) {
        (Some(s), Some(_)) => {
            return Err(cx.at(
                s,
                "table.rows.samples",
                format!("column {cl:?} has samples too: a cell's list is one or the other's"),
            ))
        }
        (Some(s), None) | (None, Some(s)) => Some(s),
        (None, None) => None,
    };
    let published = match (written, samples) {
        (Some((f, _)), Some(_)) => {
            return Err(cx.at(
                f,
                "table.rows.figures",
                format!("{}: both a figure and samples", where_()),
            ))
        }
        (Some((f, text)), None) => Some(
            Figure::parse_in(text, &unit)
                .map_err(|m| cx.at(f, "table.rows.figures", format!("{}: {m}", where_())))?,
        ),
        (None, Some(s)) => {
            let Metric::Call { stat, .. } = metric else {
                return Err(cx.at(
                    s,
                    "table.samples",
                    format!(
                        "{}: samples are summed up by the cell's call:CALL:STAT metric, not {:?}",
                        where_(),
                        metric_v.get_ref()
                    ),
                ));
            };
            Some(
                Figure::of_samples(s.get_ref(), stat, &unit)
                    .map_err(|m| cx.at(s, "table.samples", m))?,
            )
        }
        (None, None) => None,
    };
    Ok(CellSpec {
        policy,
        sweep,
        select,
        unit,
        native,
        published,
        samples: samples.map_or_else(Vec::new, |s| s.get_ref().clone()),
        tie: 0.0,
    })
}

impl TableSpec {
    /// The table of our figures beside the published ones, from the runs
    /// of `report` (one per policy and sweep point).
    pub fn table(&self, scenario: &str, report: &Report, settings: String) -> Table {
        let rows = self
            .rows
            .iter()
            .zip(&self.cells)
            .map(|(label, line)| Row {
                label: label.clone(),
                cells: line.iter().map(|c| c.evaluate(&report.runs)).collect(),
            })
            .collect();
        Table {
            id: format!("{scenario}/{}", self.name),
            family: self.thread.clone(),
            short: self.title.clone(),
            title: format!("{scenario}/{}: {}", self.name, self.title),
            measure: String::new(),
            unit: String::new(),
            settings,
            source: self.source.clone(),
            judge_rows: self.judge_rows,
            judge_columns: self.judge_columns,
            columns: self
                .columns
                .iter()
                .map(|l| Column { label: l.clone() })
                .collect(),
            rows,
        }
    }
}

impl CellSpec {
    fn evaluate(&self, runs: &[RunReport]) -> Cell {
        let run = runs.iter().find(|r| {
            r.scheduler == self.policy
                && self.sweep.as_deref() == r.variant.as_deref().map(point_of)
        });
        let (ours, at_least) = match run {
            None => (None, false),
            Some(r) => {
                let measured = vec![true; r.jobs.len()];
                let end = Instant((r.simulated_s.max(0.0) * 1e9) as u64);
                let v = self.select.evaluate(&r.jobs, &measured, &r.groups, end);
                let v = match &self.native {
                    Some(n) => self.unit.convert(v, n).unwrap_or(f64::NAN),
                    None => v,
                };
                (
                    v.is_finite().then_some(v),
                    self.select.cut(&r.jobs, &measured),
                )
            }
        };
        Cell {
            ours,
            ours_at_least: at_least,
            published: self.published.clone(),
            unit: self.unit.name.to_string(),
            tie: self.tie,
        }
    }
}
