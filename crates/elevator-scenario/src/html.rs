//! The HTML reports: self-contained pages (inline SVG, no script, no
//! network) that a browser, or headless Chromium in `scripts/check-report.sh`,
//! opens from disk.
//!
//! - `elevator reproduce --report DIR` writes `DIR/reproduce.html`: per
//!   table a bar chart of ours beside the published figure per policy, the
//!   figures and the verdict, and a link to the scenario's own page.
//! - Both `reproduce --report` and `elevator run SCENARIO --report DIR`
//!   write a scenario's page ([`run_html`]): settings in force, results,
//!   the text tables, and per job a latency CDF and a throughput timeline
//!   (bytes completed per interval of simulated time, as `vmstat 1`'s
//!   `bi`/`bo` columns that Morton's 2003 mails quote) with one line per
//!   policy, each policy in the same colour on every chart.
//!
//! Invariants: each page is a pure function of its [`Reproduction`] or
//! [`Report`]; every `<svg class="chart">` has drawn marks (`class="mark"`:
//! bars, polylines), a chart without data is left out for a sentence
//! saying so; no number prints as `NaN` or `inf`; a figure cut by the time
//! limit is marked as a lower bound.

use crate::reproduce::{Cell, Reproduction, Table};
use elevator_metrics::{Report, RunReport};
use std::fmt::Write as _;

const BAR_W: f64 = 18.0;
const GROUP_GAP: f64 = 22.0;
const CHART_H: f64 = 160.0;
const LEFT: f64 = 48.0;
const BOTTOM: f64 = 36.0;
const TOP: f64 = 10.0;

/// Text made safe for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Every cell of a table with its name: the policy in a single-figure
/// table, `row column` in a grid.
fn named_cells(t: &Table) -> Vec<(String, &Cell)> {
    let mut out = Vec::new();
    for r in &t.rows {
        for (c, cell) in r.cells.iter().enumerate() {
            let name = if t.is_single() {
                r.label.clone()
            } else {
                format!("{} {}", r.label, t.columns[c].label)
            };
            out.push((name, cell));
        }
    }
    out
}

/// The widest chart of a grid, in pixels: a grid's cells share it.
const GRID_CHART_W: f64 = 900.0;

/// One table's chart: per policy (per cell of a grid) a bar for ours and
/// one for the published figure (its range's middle), on a log scale since
/// the figures of one table span up to three decades (17 s to 2739 s in
/// experiment 7; a grid's more). A lower bound (cut run, killed run) is
/// drawn hollow. A grid's bars narrow to fit [`GRID_CHART_W`] and its
/// labels slant.
fn chart(t: &Table) -> String {
    let cells = named_cells(t);
    let values: Vec<f64> = cells
        .iter()
        .flat_map(|(_, c)| [c.ours, c.published.as_ref().map(|p| (p.low + p.high) / 2.0)])
        .flatten()
        .filter(|v| *v > 0.0)
        .collect();
    let (lo, hi) = values
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
    let (lo, hi) = if values.is_empty() {
        (1.0, 10.0)
    } else {
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0)),
        )
    };
    let y = |v: f64| {
        let f = (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10());
        TOP + CHART_H * (1.0 - f)
    };
    let n = cells.len().max(1) as f64;
    let slot = (2.0 * BAR_W + GROUP_GAP).min((GRID_CHART_W - LEFT - GROUP_GAP) / n);
    let bar_w = slot * BAR_W / (2.0 * BAR_W + GROUP_GAP);
    let gap = slot - 2.0 * bar_w;
    let slanted = slot < 2.0 * BAR_W + GROUP_GAP;
    let bottom = if slanted { BOTTOM + 60.0 } else { BOTTOM };
    let width = LEFT + n * slot + gap;
    let height = TOP + CHART_H + bottom;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="{}">"#,
        esc(&t.title)
    );
    // Decades as grid lines.
    let mut d = lo;
    while d <= hi * 1.0001 {
        let yy = y(d);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{width:.0}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
            LEFT - 4.0,
            yy + 3.0,
            d
        );
        d *= 10.0;
    }
    let base = TOP + CHART_H;
    for (i, (name, c)) in cells.iter().enumerate() {
        let x0 = LEFT + gap + i as f64 * slot;
        let mut bar = |x: f64, v: f64, class: &str, fill: &str, hollow: bool, label: String| {
            let top = y(v);
            let style = if hollow {
                format!(r#"fill="none" stroke="{fill}" stroke-width="2""#)
            } else {
                format!(r#"fill="{fill}""#)
            };
            let _ = write!(
                svg,
                r#"<rect class="mark {class}" x="{x:.1}" y="{top:.1}" width="{bar_w:.1}" height="{:.1}" {style}><title>{}</title></rect>"#,
                (base - top).max(1.0),
                esc(&label)
            );
        };
        if let Some(v) = c.ours {
            let text = format!("{name} ours: {}", c.ours_text());
            bar(x0, v, "ours", "#2b6cb0", c.ours_at_least, text);
        }
        if let Some(p) = &c.published {
            let text = format!("{name} published: {}", p.text);
            bar(
                x0 + bar_w,
                (p.low + p.high) / 2.0,
                "published",
                "#a0a0a0",
                p.at_least,
                text,
            );
        }
        if slanted {
            let (x, yy) = (x0 + bar_w, base + 10.0);
            let _ = write!(
                svg,
                r#"<text x="{x:.1}" y="{yy:.1}" font-size="8" text-anchor="end" transform="rotate(-60 {x:.1} {yy:.1})">{}</text>"#,
                esc(name)
            );
        } else {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"#,
                x0 + bar_w,
                base + 14.0,
                esc(name)
            );
        }
    }
    let measure = if t.is_single() {
        format!("{} ({})", t.measure, t.unit)
    } else {
        "each cell in its column's or row's unit".to_string()
    };
    let _ = write!(
        svg,
        r#"<text x="{LEFT}" y="{:.0}" font-size="10">{}, log scale; blue: ours, grey: published, hollow: a lower bound</text></svg>"#,
        height - 4.0,
        esc(&measure)
    );
    svg
}

/// The file name of `scenario`'s page beside `reproduce.html`.
pub fn scenario_page(scenario: &str) -> String {
    let safe: String = scenario
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.html")
}

/// The whole page; a table whose scenario's runs kept their charts links
/// to the scenario's page ([`scenario_page`]).
pub fn reproduction_html(r: &Reproduction) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>elevator reproduce</title><style>\
         body{font-family:sans-serif;max-width:60em;margin:1em auto;color:#222}\
         table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px}\
         .verdict{font-weight:bold}.settings{color:#555;font-size:90%}\
         </style></head><body>\n<h1>elevator reproduce</h1>\n",
    );
    let s = r.summary();
    let _ = writeln!(
        out,
        "<p class=\"summary\">Orderings matched in {}/{} tables ({}/{} pairs); {}/{} of our \
         figures within 2× of the published ones.</p>",
        s.ordered, s.tables, s.pairs_in_order, s.pairs, s.within_2x, s.values
    );
    for t in &r.tables {
        let v = t.verdict();
        let _ = writeln!(
            out,
            "<section class=\"experiment\" id=\"{}\"><h2>{}</h2>",
            esc(&t.id),
            esc(&t.title)
        );
        out.push_str(&chart(t));
        // A `[[table]]`'s id is `SCENARIO/NAME`.
        let charted = r.reports.iter().find(|rep| {
            (rep.scenario == t.id || t.id.starts_with(&format!("{}/", rep.scenario)))
                && rep.runs.iter().any(|run| !run.charts.is_empty())
        });
        if let Some(rep) = charted {
            let _ = write!(
                out,
                "\n<p class=\"charts-link\"><a href=\"{}\">Latency CDFs and throughput timelines \
                 per job</a></p>",
                esc(&scenario_page(&rep.scenario))
            );
        }
        if t.is_single() {
            single_table(&mut out, t);
        } else {
            grid_table(&mut out, t);
        }
        let verdict = if !v.counts() {
            "no published figure to compare with".to_string()
        } else if v.pairs == 0 {
            format!(
                "published figures tie; {}/{} within 2×",
                v.within_2x, v.values
            )
        } else {
            format!(
                "{}/{} pairs in the published order; {}/{} within 2×",
                v.pairs_in_order, v.pairs, v.within_2x, v.values
            )
        };
        let _ = writeln!(
            out,
            "<p class=\"verdict\">{}</p><p class=\"settings\">{}</p></section>",
            esc(&verdict),
            esc(&t.settings)
        );
    }
    out.push_str("</body></html>\n");
    out
}

/// A single-figure table: a row per policy.
fn single_table(out: &mut String, t: &Table) {
    out.push_str(
        "\n<table><tr><th>policy</th><th>ours</th><th>published</th><th>ratio</th>\
         <th>within 2×</th></tr>\n",
    );
    for row in &t.rows {
        let Some(c) = row.cells.first() else { continue };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&row.label),
            esc(&c.ours_text()),
            esc(c.published.as_ref().map_or("-", |p| p.text.as_str())),
            c.ratio().map_or("-".into(), |x| format!("{x:.2}")),
            c.within().map_or("-", |w| if w { "yes" } else { "no" })
        );
    }
    out.push_str("</table>\n");
}

/// A `[[table]]`: its source, then the grid, each cell ours, the published
/// figure as written and the ratio (`*` when outside 2×).
fn grid_table(out: &mut String, t: &Table) {
    let _ = write!(
        out,
        "\n<p class=\"source\">Source: {}</p>\n<table><tr><th></th>",
        esc(&t.source)
    );
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", esc(&c.label));
    }
    out.push_str("</tr>\n");
    for row in &t.rows {
        let _ = write!(out, "<tr><td>{}</td>", esc(&row.label));
        for c in &row.cells {
            let ratio = match c.ratio() {
                Some(_) => format!(" ×{}", crate::reproduce::ratio_text(c)),
                None => String::new(),
            };
            let _ = write!(
                out,
                "<td>{} {} / {}{ratio}</td>",
                esc(&c.ours_sig()),
                esc(&c.unit),
                esc(&c.published.as_ref().map_or("-".into(), |p| p.number()))
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

// ---------------------------------------------------------------------
// `elevator run SCENARIO --report DIR`: one scenario's page.
// ---------------------------------------------------------------------

/// Colours for policies: Okabe & Ito's eight colour-blind-safe colours
/// (2008, "Color Universal Design"), yellow left out (unreadable on white),
/// then five darker tones; a policy keeps its colour on every page (see
/// [`policy_colour`]).
const PALETTE: [&str; 12] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#8C564B",
    "#7F7F7F", "#17BECF", "#6A3D9A", "#B15928",
];

/// Plot area of the line charts, in pixels.
const PLOT_W: f64 = 390.0;
const PLOT_H: f64 = 200.0;
const PLOT_LEFT: f64 = 58.0;
const PLOT_TOP: f64 = 12.0;
const PLOT_BOTTOM: f64 = 40.0;
const PLOT_RIGHT: f64 = 26.0;

/// At most this many points on a timeline: one per 4 pixels, smooth
/// enough to read beside its neighbours, fine enough to show a pause of a
/// hundredth of the run (the 20 s without reads of CFQ in Morton's
/// experiment 4 is a fiftieth).
const TIMELINE_POINTS: u64 = 100;

/// The colour of run `index` of `report`: by the policy's place in the
/// registry when each policy runs once (so `deadline` has one colour on
/// every page), by the run's place when a sweep runs a policy several times.
fn policy_colour(report: &Report, index: usize) -> &'static str {
    let run = &report.runs[index];
    let once = report
        .runs
        .iter()
        .filter(|r| r.scheduler == run.scheduler)
        .count()
        == 1;
    let slot = if once {
        elevator_sched::registry()
            .iter()
            .position(|t| t.name == run.scheduler)
            .unwrap_or(index)
    } else {
        index
    };
    PALETTE[slot % PALETTE.len()]
}

/// Tick values for a linear axis from 0 to at least `max`: steps of 1, 2
/// or 5 times a power of ten, at most six ticks past zero.
fn linear_ticks(max: f64) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let decade = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|s| max / s <= 6.0)
        .unwrap_or(10.0 * decade);
    let n = (max / step).ceil() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// A tick label without float noise (`0.30000000000000004` prints `0.3`).
fn tick_label(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// One line of a chart: its legend label, colour, dash pattern and points
/// in data coordinates.
struct Line {
    label: String,
    colour: &'static str,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// The axes of a chart: how a value maps to pixels, and the ticks.
struct Axes {
    x_log: bool,
    x_ticks: Vec<f64>,
    y_ticks: Vec<f64>,
    x_label: String,
    y_label: String,
}

impl Axes {
    fn scale(ticks: &[f64], log: bool, v: f64) -> f64 {
        let (lo, hi) = (ticks[0], ticks[ticks.len() - 1]);
        let f = if log {
            (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10())
        } else {
            (v - lo) / (hi - lo)
        };
        f.clamp(0.0, 1.0)
    }
    fn x(&self, v: f64) -> f64 {
        PLOT_LEFT + PLOT_W * Axes::scale(&self.x_ticks, self.x_log, v)
    }
    fn y(&self, v: f64) -> f64 {
        PLOT_TOP + PLOT_H * (1.0 - Axes::scale(&self.y_ticks, false, v))
    }
}

/// A line chart as inline SVG: grid, ticks with labels, axis titles with
/// units, one `<polyline class="mark">` per line and a legend beneath.
/// Lines without points are left out; the caller draws no chart at all
/// when none has any (so every `svg.chart` has drawn marks).
fn line_chart(title: &str, axes: &Axes, lines: &[Line]) -> String {
    // Three legend columns, two when labels are long (sweep points).
    let longest = lines
        .iter()
        .map(|l| l.label.chars().count())
        .max()
        .unwrap_or(0);
    let columns = if longest > 20 { 2 } else { 3 };
    let legend_rows = lines.len().div_ceil(columns);
    let width = PLOT_LEFT + PLOT_W + PLOT_RIGHT;
    let height = PLOT_TOP + PLOT_H + PLOT_BOTTOM + 16.0 * legend_rows as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="{}" font-family="sans-serif">"#,
        esc(title)
    );
    let (left, right) = (PLOT_LEFT, PLOT_LEFT + PLOT_W);
    let (top, bottom) = (PLOT_TOP, PLOT_TOP + PLOT_H);
    for &t in &axes.x_ticks {
        let x = axes.x(t);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{bottom}" stroke="#e4e4e4"/><text x="{x:.1}" y="{:.0}" font-size="10" text-anchor="middle">{}</text>"##,
            bottom + 13.0,
            tick_label(t)
        );
    }
    for &t in &axes.y_ticks {
        let y = axes.y(t);
        let _ = write!(
            svg,
            r##"<line x1="{left}" x2="{right}" y1="{y:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.0}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
            left - 4.0,
            y + 3.5,
            tick_label(t)
        );
    }
    let _ = write!(
        svg,
        r##"<rect x="{left}" y="{top}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#888"/><text x="{:.0}" y="{:.0}" font-size="11" text-anchor="middle">{}</text><text transform="translate(14 {:.0}) rotate(-90)" font-size="11" text-anchor="middle">{}</text>"##,
        left + PLOT_W / 2.0,
        bottom + 28.0,
        esc(&axes.x_label),
        top + PLOT_H / 2.0,
        esc(&axes.y_label)
    );
    for (shown, line) in lines.iter().filter(|l| !l.points.is_empty()).enumerate() {
        let points: Vec<String> = line
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", axes.x(x), axes.y(y)))
            .collect();
        let dash = if line.dashed {
            r#" stroke-dasharray="5 3""#
        } else {
            ""
        };
        let _ = write!(
            svg,
            r#"<polyline class="mark" fill="none" stroke="{}" stroke-width="1.6"{dash} points="{}"><title>{}</title></polyline>"#,
            line.colour,
            points.join(" "),
            esc(&line.label)
        );
        let lx = left + (shown % columns) as f64 * (PLOT_W / columns as f64);
        let ly = bottom + PLOT_BOTTOM + 4.0 + (shown / columns) as f64 * 16.0;
        let _ = write!(
            svg,
            r#"<line x1="{lx:.0}" x2="{:.0}" y1="{ly:.0}" y2="{ly:.0}" stroke="{}" stroke-width="2.5"{dash}/><text x="{:.0}" y="{:.0}" font-size="10">{}</text>"#,
            lx + 18.0,
            line.colour,
            lx + 22.0,
            ly + 3.5,
            esc(&line.label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A run's legend label: policy (and sweep point), marked when its result
/// is a lower bound because the time limit cut a measured job.
fn run_label(run: &RunReport) -> String {
    if run.result.cut {
        format!("{} (cut)", run.label())
    } else {
        run.label()
    }
}

/// The latency CDF of job kind `k` under every run that has samples.
fn cdf_chart(report: &Report, k: usize) -> Option<String> {
    let lines: Vec<Line> = report
        .runs
        .iter()
        .enumerate()
        .filter_map(|(i, run)| {
            let c = run.charts.get(k)?;
            // A step function: each point is the fraction at or below it.
            let mut points = Vec::with_capacity(2 * c.cdf.len());
            let mut below = 0.0;
            for &(ms, f) in &c.cdf {
                points.push((ms, below));
                points.push((ms, f));
                below = f;
            }
            Some(Line {
                label: run_label(run),
                colour: policy_colour(report, i),
                dashed: false,
                points,
            })
        })
        .collect();
    let all: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    if all.is_empty() {
        return None;
    }
    // Decades from 1 µs up: the histogram's floor is 1 ns, nothing the
    // devices modelled answer in under a microsecond.
    let lo = all.iter().copied().fold(f64::MAX, f64::min).max(1e-3);
    let hi = all.iter().copied().fold(0.0, f64::max).max(lo);
    let first = lo.log10().floor() as i32;
    let last = (hi.log10().ceil() as i32).max(first + 1);
    let axes = Axes {
        x_log: true,
        x_ticks: (first..=last).map(|e| 10f64.powi(e)).collect(),
        y_ticks: (0..=5).map(|i| f64::from(i) * 0.2).collect(),
        x_label: "latency (ms, log scale)".into(),
        y_label: "fraction of I/Os at or below".into(),
    };
    let name = &report.runs[0].charts[k].name;
    Some(line_chart(&format!("{name}: latency CDF"), &axes, &lines))
}

/// The throughput timeline of job kind `k`: MB/s read (solid) and written
/// (dashed) per interval of simulated time, per run.
fn timeline_chart(report: &Report, k: usize) -> Option<String> {
    let end = report
        .runs
        .iter()
        .map(|r| r.simulated_s)
        .fold(0.0, f64::max);
    // One interval for every line, coarse enough for about
    // TIMELINE_POINTS points.
    let mut interval = report
        .runs
        .iter()
        .filter_map(|r| r.charts.get(k))
        .map(|c| c.throughput.interval())
        .max()?;
    while end / interval.as_secs_f64() > TIMELINE_POINTS as f64 {
        interval = interval.mul(2);
    }
    let step = interval.as_secs_f64();
    let mut lines = Vec::new();
    for (i, run) in report.runs.iter().enumerate() {
        let Some(c) = run.charts.get(k) else { continue };
        let t = c.throughput.at_interval(interval);
        if t.total() == (0, 0) {
            continue;
        }
        for (read, word) in [(true, "read"), (false, "write")] {
            let bytes: Vec<u64> = t
                .buckets()
                .iter()
                .map(|b| if read { b.0 } else { b.1 })
                .collect();
            if bytes.iter().all(|b| *b == 0) {
                continue;
            }
            // Each interval's rate, drawn at its middle; the last one
            // covers only up to the run's end. The line runs to the end
            // of this run, at zero where nothing completed.
            let buckets = ((run.simulated_s / step).ceil() as usize).max(bytes.len());
            let points = (0..buckets)
                .map(|b| {
                    let from = b as f64 * step;
                    let span = (run.simulated_s.max(from + step * 1e-3) - from).min(step);
                    let mb = *bytes.get(b).unwrap_or(&0) as f64 / 1e6;
                    (from + span / 2.0, mb / span)
                })
                .collect();
            lines.push(Line {
                label: format!("{} {word}", run_label(run)),
                colour: policy_colour(report, i),
                dashed: !read,
                points,
            });
        }
    }
    if lines.is_empty() {
        return None;
    }
    let top = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let axes = Axes {
        x_log: false,
        x_ticks: linear_ticks(end),
        y_ticks: linear_ticks(top),
        x_label: format!("simulated time (s); one point per {}", duration_text(step)),
        y_label: "throughput (MB/s)".into(),
    };
    let name = &report.runs[0].charts[k].name;
    Some(line_chart(
        &format!("{name}: throughput over time"),
        &axes,
        &lines,
    ))
}

/// `0.1 s` or `6.4 s`, as the timeline's axis names its interval.
fn duration_text(s: f64) -> String {
    format!("{} s", tick_label(s))
}

const RUN_STYLE: &str =
    "body{font-family:sans-serif;max-width:64em;margin:1em auto;padding:0 1em;color:#222}\
     table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px}\
     code{font-size:12px}pre{font-size:12px;background:#f7f7f7;padding:.5em;overflow-x:auto}\
     .charts{display:flex;flex-wrap:wrap;gap:1em}.note{color:#555;font-size:90%}\
     .cut{color:#b00}";

/// The page of one scenario's run: the results, then per job the latency
/// CDF and the throughput timeline of every policy, then the settings in
/// force and the text report.
///
/// Invariant: every `<svg class="chart">` has at least one drawn mark (a
/// chart with no data is a sentence instead), and no number prints as
/// `NaN` or `inf`.
pub fn run_html(report: &Report) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>elevator run {}</title><style>{RUN_STYLE}</style></head><body>\n\
         <h1>{}</h1>\n<p>{}</p>\n",
        esc(&report.scenario),
        esc(&report.scenario),
        esc(&report.description)
    );
    let _ = writeln!(
        out,
        "<p class=\"settings\">device <b>{}</b>, seed <b>{}</b></p>",
        esc(&report.device),
        report.seed
    );
    out.push_str(&results_table(report));
    if report.runs.iter().all(|r| r.charts.is_empty()) {
        out.push_str("<p class=\"note\">No per-job charts: the runs did not record them.</p>\n");
    }
    let kinds = report
        .runs
        .iter()
        .map(|r| r.charts.len())
        .max()
        .unwrap_or(0);
    for k in 0..kinds {
        let Some(first) = report.runs.iter().find_map(|r| r.charts.get(k)) else {
            continue;
        };
        let jobs = if first.jobs > 1 {
            format!(" ({} identical jobs summed)", first.jobs)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "<section class=\"job\"><h2>{}{}</h2><div class=\"charts\">",
            esc(&first.name),
            esc(&jobs)
        );
        match cdf_chart(report, k) {
            Some(svg) => out.push_str(&svg),
            None => out.push_str("<p class=\"note\">No I/O completed: no latency CDF.</p>"),
        }
        match timeline_chart(report, k) {
            Some(svg) => out.push_str(&svg),
            None => out.push_str("<p class=\"note\">No bytes completed: no timeline.</p>"),
        }
        out.push_str("</div></section>\n");
    }
    out.push_str("<h2>Settings in force</h2>\n");
    out.push_str(&settings_table(report));
    let _ = writeln!(
        out,
        "<h2>The text report</h2>\n<pre>{}</pre>",
        esc(&report.to_table())
    );
    out.push_str(
        "<p class=\"note\">Latency: submission to completion of each I/O (each system call \
         for host processes). Throughput: bytes completed per interval of simulated time \
         (MB = 10<sup>6</sup> bytes), solid reads, dashed writes, as vmstat's bi and bo \
         columns. A run marked (cut) hit the time limit before a measured job finished: \
         its result is a lower bound.</p>\n</body></html>\n",
    );
    out
}

/// Per run its headline result (a lower bound marked `>`), the published
/// figure, simulated time and aggregate throughput.
fn results_table(report: &Report) -> String {
    let Some(first) = report.runs.first() else {
        return "<p class=\"note\">No runs.</p>\n".into();
    };
    let mut out = format!(
        "<table class=\"results\"><tr><th>policy</th><th>{} ({})</th><th>published</th>\
         <th>simulated (s)</th><th>aggregate (MB/s)</th></tr>\n",
        esc(&first.result.name),
        esc(&first.result.unit)
    );
    for (i, run) in report.runs.iter().enumerate() {
        let class = if run.result.cut { " class=\"cut\"" } else { "" };
        let _ = writeln!(
            out,
            "<tr><td><span style=\"color:{}\">■</span> {}</td><td{class}>{}</td><td>{}</td>\
             <td>{:.1}</td><td>{:.2}</td></tr>",
            policy_colour(report, i),
            esc(&run.label()),
            esc(&run.result.text()),
            esc(run.published.as_deref().unwrap_or("-")),
            run.simulated_s,
            run.aggregate_mb_s
        );
    }
    out.push_str("</table>\n");
    if report.runs.iter().any(|r| r.result.cut) {
        out.push_str(
            "<p class=\"note cut\">&gt; marks a lower bound: the time limit cut a measured \
             job before it finished.</p>\n",
        );
    }
    out
}

/// The block layer's settings and each policy's tunables in force; the
/// block settings once when every run had the same.
fn settings_table(report: &Report) -> String {
    let pairs = |m: Vec<String>| {
        if m.is_empty() {
            "-".into()
        } else {
            m.join(", ")
        }
    };
    let block_of =
        |run: &RunReport| pairs(run.block.iter().map(|(k, v)| format!("{k}={v}")).collect());
    let shared = report
        .runs
        .first()
        .map(block_of)
        .filter(|b| report.runs.iter().all(|r| block_of(r) == *b));
    let mut out = String::new();
    if let Some(b) = &shared {
        let _ = writeln!(
            out,
            "<p class=\"settings\">Block layer, every policy: <code>{}</code></p>",
            esc(b)
        );
    }
    out.push_str("<table class=\"settings\"><tr><th>policy</th>");
    if shared.is_none() {
        out.push_str("<th>block layer</th>");
    }
    out.push_str("<th>tunables in force</th></tr>\n");
    for run in &report.runs {
        let block = match shared {
            Some(_) => String::new(),
            None => format!("<td><code>{}</code></td>", esc(&block_of(run))),
        };
        let tunables = pairs(
            run.tunables
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
        );
        let _ = writeln!(
            out,
            "<tr><td>{}</td>{block}<td><code>{}</code></td></tr>",
            esc(&run.label()),
            esc(&tunables)
        );
    }
    out.push_str("</table>\n");
    out
}
