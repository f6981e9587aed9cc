//! The reproduction as text and Markdown: per table ours beside the published figure, the ratio
//! and the verdict, grids folded to the terminal's width, and the summary.

use super::*;

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
pub(super) fn single_text(out: &mut String, t: &Table) {
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
pub(super) fn shared_unit<'a>(mut cells: impl Iterator<Item = &'a Cell>) -> Option<&'a str> {
    let first = cells.next()?.unit.as_str();
    cells.all(|c| c.unit == first).then_some(first)
}

/// Headings with their units: a column's unit in its heading when all its
/// cells share it, else a row's in the row's label.
pub(super) fn headings(t: &Table) -> (Vec<String>, Vec<String>) {
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
pub(super) fn chunks(lead: usize, widths: &[usize], width: usize) -> Vec<std::ops::Range<usize>> {
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
pub(super) fn grid_text(out: &mut String, t: &Table) {
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
pub(super) const MAX_LISTED: usize = 5;

/// `rt1 read < rt0 read published, > ours` as a sentence.
pub(super) fn pair_text(t: &Table, p: &Pair) -> String {
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
pub(super) fn family_markdown(out: &mut String, tables: &[&Table]) {
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
pub(super) fn grid_markdown(out: &mut String, t: &Table) {
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
