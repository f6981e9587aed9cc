//! `elevator reproduce --report DIR`: the tables as one self-contained HTML
//! page, each with a bar chart of ours beside the published figure per
//! policy (inline SVG, no script, no network) and its verdict.
//!
//! Invariant: the page is a pure function of the [`Reproduction`]; every
//! table gets exactly one `<svg class="chart">`, and every policy with a
//! figure a bar in it.

use crate::reproduce::{Reproduction, Table};
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

/// One table's chart: per policy a bar for ours and one for the published
/// figure (its range's middle), on a log scale since the figures of one
/// table span up to three decades (17 s to 2739 s in experiment 7). A
/// lower bound (cut run, killed run) is drawn hollow.
fn chart(t: &Table) -> String {
    let values: Vec<f64> = t
        .rows
        .iter()
        .flat_map(|r| [r.ours, r.published.as_ref().map(|p| (p.low + p.high) / 2.0)])
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
    let width = LEFT + t.rows.len() as f64 * (2.0 * BAR_W + GROUP_GAP) + GROUP_GAP;
    let height = TOP + CHART_H + BOTTOM;
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
    for (i, r) in t.rows.iter().enumerate() {
        let x0 = LEFT + GROUP_GAP + i as f64 * (2.0 * BAR_W + GROUP_GAP);
        let mut bar = |x: f64, v: f64, class: &str, fill: &str, hollow: bool, label: String| {
            let top = y(v);
            let style = if hollow {
                format!(r#"fill="none" stroke="{fill}" stroke-width="2""#)
            } else {
                format!(r#"fill="{fill}""#)
            };
            let _ = write!(
                svg,
                r#"<rect class="{class}" x="{x:.1}" y="{top:.1}" width="{BAR_W}" height="{:.1}" {style}><title>{}</title></rect>"#,
                (base - top).max(1.0),
                esc(&label)
            );
        };
        if let Some(v) = r.ours {
            let text = format!("{} ours: {}", r.label, r.ours_text(&t.unit));
            bar(x0, v, "ours", "#2b6cb0", r.ours_at_least, text);
        }
        if let Some(p) = &r.published {
            let text = format!("{} published: {}", r.label, p.text);
            bar(
                x0 + BAR_W,
                (p.low + p.high) / 2.0,
                "published",
                "#a0a0a0",
                p.at_least,
                text,
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"#,
            x0 + BAR_W,
            base + 14.0,
            esc(&r.label)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{LEFT}" y="{:.0}" font-size="10">{} ({}), log scale; blue: ours, grey: published, hollow: a lower bound</text></svg>"#,
        height - 4.0,
        esc(&t.measure),
        esc(&t.unit)
    );
    svg
}

/// The whole page.
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
        "<p class=\"summary\">Orderings matched in {}/{} tables; {}/{} of our figures within 2× \
         of the published ones.</p>",
        s.ordered, s.tables, s.within_2x, s.values
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
        out.push_str(
            "\n<table><tr><th>policy</th><th>ours</th><th>published</th><th>ratio</th>\
             <th>within 2×</th></tr>\n",
        );
        for row in &t.rows {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&row.label),
                esc(&row.ours_text(&t.unit)),
                esc(row.published.as_ref().map_or("-", |p| p.text.as_str())),
                row.ratio().map_or("-".into(), |x| format!("{x:.2}")),
                row.within().map_or("-", |w| if w { "yes" } else { "no" })
            );
        }
        out.push_str("</table>\n");
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
