//! Plain-text layout shared by every table we print: left-aligned columns
//! two spaces apart, indented two, and no line wider than [`WIDTH`].
//!
//! Invariant: every line [`columns`] and [`wrap`] produce fits [`WIDTH`]
//! columns unless a single word (or the fixed columns left of the last
//! one) is wider; long text wraps at spaces, never is cut.

use std::fmt::Write as _;

/// The widest line a table prints: a terminal of 100 columns, the width the
/// team charter sets for every output.
pub const WIDTH: usize = 100;

/// `text` after `prefix`, wrapped at spaces to `width` columns, later
/// lines indented as far as the prefix.
pub fn wrap(text: &str, width: usize, prefix: &str) -> String {
    let indent = prefix.chars().count();
    let mut lines = vec![prefix.to_string()];
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let line = lines.last_mut().expect("one line");
        let fresh = line.chars().count() == indent;
        if !fresh && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(format!("{}{word}", " ".repeat(indent)));
        } else {
            if !fresh {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
        .iter()
        .map(|l| l.trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Left-aligned columns, two spaces apart, each line indented two; the
/// last column wraps under itself to keep lines within [`WIDTH`].
pub fn columns(out: &mut String, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    if cols == 0 {
        return;
    }
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
        let mut line = String::from("  ");
        let n = row.len();
        for (c, cell) in row.iter().enumerate().take(n.saturating_sub(1)) {
            let _ = write!(line, "{cell:<w$}  ", w = widths[c]);
        }
        let last = row.last().map_or("", String::as_str);
        let lead = line.chars().count();
        let text = if lead + last.chars().count() <= WIDTH || lead + 20 > WIDTH {
            format!("{line}{last}")
        } else {
            wrap(last, WIDTH, &line)
        };
        for l in text.lines() {
            let _ = writeln!(out, "{}", l.trim_end());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_lines_within_the_width_and_loses_no_word() {
        let text = "word ".repeat(60);
        let wrapped = wrap(text.trim(), 40, "  key: ");
        for line in wrapped.lines() {
            assert!(line.chars().count() <= 40, "{line:?}");
        }
        assert_eq!(wrapped.matches("word").count(), 60);
        assert!(wrapped.starts_with("  key: word"));
    }

    #[test]
    fn columns_wrap_the_last_column() {
        let mut out = String::new();
        let long = "source ".repeat(30);
        columns(
            &mut out,
            &[
                vec!["policy".into(), "note".into()],
                vec!["deadline".into(), long.trim().into()],
            ],
        );
        assert!(out.lines().all(|l| l.chars().count() <= WIDTH), "{out}");
        assert_eq!(out.matches("source").count(), 30);
        assert!(out.starts_with("  policy    note\n"));
    }
}
