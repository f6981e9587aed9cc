//! Every figure of every built-in `[[table]]` is the thread's: checked
//! against the seed mails in `../shared/seeds/`, so that a typo in a
//! transcription fails here rather than moving a verdict.
//!
//! - A row's written figures appear, as written and in order, on one line
//!   of the seed, each row on a line after the previous row's (the thread's
//!   table, row by row); or, where the thread prints one table per policy
//!   (Zoccolo's tiotest), each figure appears in the section headed
//!   `** COLUMN-LABEL` of its column.
//! - A list of samples appears whole, as consecutive `fsync time: X`
//!   lines with no other sample before or after it.

use elevator_core::shared::shared_present;
use elevator_scenario::{builtin, builtins, TableSpec};
use std::path::PathBuf;

/// The seed mail of each thread a table names.
fn seed(thread: &str) -> Option<&'static str> {
    Some(match thread {
        "brunelle-2009" => "brunelle-2009-cfq-ioprio-sort.txt",
        "zoccolo-2009" => "zoccolo-2009-deadline-mc.txt",
        "goyal-2009" | "righi-2009" => "goyal-righi-2009-io-controllers.txt",
        _ => return None,
    })
}

/// Whether `line` holds `figures` in order (each after the previous).
fn in_order(line: &str, figures: &[&str]) -> bool {
    let mut rest = line;
    for f in figures {
        match rest.find(f) {
            // A figure is a whole token: not the tail of a longer number.
            Some(i) if !rest[..i].ends_with(|c: char| c.is_ascii_digit() || c == '.') => {
                rest = &rest[i + f.len()..];
                if rest.starts_with(|c: char| c.is_ascii_digit()) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

/// The lines of each section headed `** LABEL` (a label ends at `:`).
fn sections<'a>(lines: &[&'a str], label: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(head) = l.strip_prefix("** ") else {
            continue;
        };
        if head.trim_end_matches(':').trim() != label {
            continue;
        }
        let end = lines[i + 1..]
            .iter()
            .position(|l| l.starts_with("** ") || l.starts_with("* "))
            .map_or(lines.len(), |p| i + 1 + p);
        out.push(lines[i + 1..end].to_vec());
    }
    out
}

fn check(scenario: &str, t: &TableSpec, text: &str, problems: &mut Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut after = 0;
    for (r, row) in t.cells.iter().enumerate() {
        let written: Vec<(usize, &str)> = row
            .iter()
            .enumerate()
            .filter(|(_, c)| c.samples.is_empty())
            .filter_map(|(k, c)| Some((k, c.published.as_ref()?.text.as_str())))
            .collect();
        if !written.is_empty() {
            let figures: Vec<&str> = written.iter().map(|w| w.1).collect();
            match lines[after..].iter().position(|l| in_order(l, &figures)) {
                Some(p) => after += p + 1,
                None => {
                    for (k, f) in &written {
                        let found = sections(&lines, &t.columns[*k])
                            .iter()
                            .any(|s| s.iter().any(|l| in_order(l, &[f])));
                        if !found {
                            problems.push(format!(
                                "{scenario}/{}: row {:?}: {figures:?} on no line of the seed \
                                 in order, and {f:?} in no section `** {}`",
                                t.name, t.rows[r], t.columns[*k]
                            ));
                        }
                    }
                }
            }
        }
        for (k, c) in row.iter().enumerate() {
            if c.samples.is_empty() {
                continue;
            }
            let want: Vec<String> = c
                .samples
                .iter()
                .map(|s| format!("fsync time: {s}"))
                .collect();
            let whole = lines.windows(want.len()).enumerate().any(|(i, w)| {
                w.iter().zip(&want).all(|(l, s)| l.trim() == s)
                    && !(i > 0 && lines[i - 1].starts_with("fsync time:"))
                    && !lines
                        .get(i + want.len())
                        .is_some_and(|l| l.starts_with("fsync time:"))
            });
            if !whole {
                problems.push(format!(
                    "{scenario}/{}: column {:?}: its {} samples are no whole list of the seed",
                    t.name,
                    t.columns[k],
                    c.samples.len()
                ));
            }
        }
    }
}

#[test]
fn every_published_figure_is_the_threads() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/seeds");
    let mut problems = Vec::new();
    let mut tables = 0;
    let mut figures = 0;
    for (name, _) in builtins() {
        let s = builtin(name).expect("built-in").expect("valid");
        for t in &s.tables {
            let Some(file) = seed(&t.thread) else {
                problems.push(format!(
                    "{name}/{}: no seed for thread {:?}",
                    t.name, t.thread
                ));
                continue;
            };
            let path = dir.join(file);
            if !shared_present(&path) {
                return;
            }
            let text = std::fs::read_to_string(&path).expect("seed readable");
            check(name, t, &text, &mut problems);
            tables += 1;
            figures += t
                .cells
                .iter()
                .flatten()
                .filter(|c| c.published.is_some())
                .count();
        }
    }
    println!("{tables} tables, {figures} published figures checked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Brunelle 2, Zoccolo 3, Goyal 2, Righi 8.
    assert_eq!(tables, 15, "tables of the 2009 threads");
}

#[test]
fn a_mistyped_figure_is_caught() {
    let text = "1 0 |  311164  310760 |\n1 1 |  129712  129792 |\n";
    let lines: Vec<&str> = text.lines().collect();
    assert!(in_order(lines[0], &["311164", "310760"]));
    assert!(!in_order(lines[0], &["310760", "311164"]), "order");
    assert!(!in_order(lines[0], &["11164"]), "a tail is no figure");
    assert!(!in_order(lines[1], &["12971"]), "a head is no figure");
}
