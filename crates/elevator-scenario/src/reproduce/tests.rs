use super::render::chunks;
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
    assert!(committed.missing(&good).is_empty());
    let none = Reproduction {
        tables: Vec::new(),
        ..good
    };
    let gone = committed.missing(&none);
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert!(
        gone[0].contains("committed but not in this run"),
        "{gone:?}"
    );
}
