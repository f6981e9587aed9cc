//! Bad scenario files get an error naming the file, line and key; no input panics.

use elevator_scenario::Scenario;
use proptest::prelude::*;

const GOOD: &str = r#"
name = "t"
description = "a test"

[result]
name = "time"
unit = "s"
metric = "completion"

[[job]]
name = "reader"
rw = "read"
bs = "128k"
size = "1m"
"#;

fn err(text: &str) -> String {
    Scenario::parse("my.toml", text).unwrap_err().to_string()
}

#[test]
fn a_good_file_parses() {
    let s = Scenario::parse("my.toml", GOOD).unwrap();
    assert_eq!(s.jobs.len(), 1);
    assert_eq!(s.schedulers, vec!["noop", "deadline"]);
}

#[test]
fn bad_values_name_file_line_and_key() {
    let cases = [
        (
            GOOD.replace("bs = \"128k\"", "bs = \"12x\""),
            "my.toml:13: key `job.bs`",
        ),
        (
            GOOD.replace(
                "description = \"a test\"",
                "description = \"a test\"\nper_group = \"tall\"",
            ),
            "my.toml:4: key `per_group`",
        ),
        (
            GOOD.replace("bs = \"128k\"", "bs = \"100\""),
            "my.toml:13: key `job.bs`",
        ),
        (
            GOOD.replace("rw = \"read\"", "rw = \"sideways\""),
            "my.toml:12: key `job.rw`",
        ),
        (
            GOOD.replace("size = \"1m\"", "size = \"1m\"\nprio = \"rt/9\""),
            "my.toml:15: key `job.prio`",
        ),
        (
            GOOD.replace("size = \"1m\"", "size = \"1m\"\niodepth = 0"),
            "my.toml:15: key `job.iodepth`",
        ),
        (
            GOOD.replace("size = \"1m\"", "size = \"1m\"\nthink = \"5\""),
            "my.toml:15: key `job.think`",
        ),
        (
            format!("{GOOD}\n[[startup]]\nname = \"app\"\ntrace = \"xterm\"\nthink_scale = -1.0\n"),
            "my.toml:19: key `startup.think_scale`",
        ),
        (
            GOOD.replace("size = \"1m\"", "size = \"1m\"\nbogus = 1"),
            "my.toml:15: key `bogus`",
        ),
        (
            GOOD.replace("size = \"1m\"", "size = \"1m\"\niodepth = \"deep\""),
            "my.toml:15: key `iodepth`",
        ),
        (
            GOOD.replace("metric = \"completion\"", "metric = \"speed\""),
            "my.toml:8: key `result.metric`",
        ),
        (
            format!("{GOOD}\n[sched.deadline]\nfifo_bath = 4\n"),
            "my.toml:17: key `sched.deadline.fifo_bath`",
        ),
        (
            format!("{GOOD}\n[sched.deadline]\nfifo_batch = -4\n"),
            "my.toml:17: key `sched.deadline.fifo_batch`",
        ),
        (
            format!("{GOOD}\n[block]\nmax_sectors = \"12\"\n"),
            "my.toml:17: key `block.max_sectors`",
        ),
        (
            format!("{GOOD}\n[sched.elevator9]\nx = 4\n"),
            "my.toml:17: key `sched.elevator9`",
        ),
        (
            GOOD.replace("description", "schedulers = [\"fifo\"]\ndescription"),
            "my.toml:3: key `schedulers`",
        ),
        (GOOD.replace("name = \"t\"", "name = \"t"), "my.toml:2"),
    ];
    for (text, want) in cases {
        let got = err(&text);
        assert!(got.starts_with(want), "want {want:?}, got {got:?}");
    }
}

#[test]
fn missing_sections_are_named() {
    let got = err("name = \"x\"\ndescription = \"y\"\n");
    assert!(got.contains("result"), "{got}");
    let only_background = GOOD.replace("size = \"1m\"", "size = \"1m\"\nbackground = true");
    assert!(
        err(&only_background).contains("job"),
        "{}",
        err(&only_background)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary text never panics the parser.
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = Scenario::parse("fuzz.toml", &text);
    }

    /// Mutations of a good file never panic, and errors always name the file.
    #[test]
    fn mutated_files_never_panic(pos in 0usize..300, insert in "[a-z0-9=\\[\\]\"\\.\n -]{0,12}", cut in 0usize..20) {
        let mut text = GOOD.to_string();
        let pos = pos.min(text.len());
        let end = (pos + cut).min(text.len());
        if text.is_char_boundary(pos) && text.is_char_boundary(end) {
            text.replace_range(pos..end, &insert);
        }
        if let Err(e) = Scenario::parse("fuzz.toml", &text) {
            prop_assert!(e.to_string().starts_with("fuzz.toml"));
        }
    }
}

/// Issue 15: inputs that were accepted silently or blamed on the wrong
/// place.
#[test]
fn nonsense_that_was_accepted_silently_is_an_error_at_its_line() {
    let job2 = "\n[[job]]\nname = \"reader\"\nrw = \"read\"\nbs = \"4k\"\nsize = \"1m\"\n";
    let cases = [
        // fio ignores rwmixread for a pure reader; we refuse it.
        (
            GOOD.replace("rw = \"read\"", "rw = \"read\"\nrwmixread = 70"),
            "my.toml:13: key `job.rwmixread`",
        ),
        // Sizes, offsets and regions are whole sectors.
        (
            GOOD.replace("size = \"1m\"", "size = \"1m\"\noffset = \"1000\""),
            "my.toml:15: key `job.offset`",
        ),
        (
            GOOD.replace("size = \"1m\"", "size = \"1m\"\nregion = \"511\""),
            "my.toml:15: key `job.region`",
        ),
        (
            GOOD.replace("size = \"1m\"", "size = \"1\""),
            "my.toml:14: key `job.size`",
        ),
        (
            GOOD.replace("size = \"1m\"", "size = \"1m\"\noffset_increment = \"1k1\""),
            "my.toml:15: key `job.offset_increment`",
        ),
        // Two rows of one name.
        (format!("{GOOD}{job2}"), "my.toml:17: key `job.name`"),
        // The device and the policy list are the file's, not the command line's.
        (
            GOOD.replace("[result]", "device = \"floppy\"\n\n[result]"),
            "my.toml:5: key `device`",
        ),
        (
            GOOD.replace("[result]", "schedulers = []\n\n[result]"),
            "my.toml:5: key `schedulers`",
        ),
        (
            GOOD.replace("[result]", "schedulers = [\"noop\", \"noop\"]\n\n[result]"),
            "my.toml:5: key `schedulers`",
        ),
        // A wake-up every nanosecond for an hour.
        (
            GOOD.replace("size = \"1m\"", "size = \"1m\"\nperiod = \"1us\""),
            "my.toml:15: key `job.period`",
        ),
    ];
    for (text, want) in cases {
        let e = err(&text);
        assert!(e.starts_with(want), "want {want:?}, got {e:?}");
    }
}

#[test]
fn a_missing_result_table_is_named_without_a_misleading_line() {
    let text = GOOD.replace(
        "[result]\nname = \"time\"\nunit = \"s\"\nmetric = \"completion\"\n",
        "",
    );
    assert_eq!(
        err(&text),
        "my.toml: key `result`: the scenario has no `result` (a top-level key or table it needs)"
    );
}

#[test]
fn more_tasks_than_pid_max_are_refused() {
    let mut text = GOOD.to_string();
    for i in 0..9 {
        text.push_str(&format!(
            "\n[[job]]\nname = \"r{i}\"\nrw = \"read\"\nbs = \"4k\"\nsize = \"1m\"\ncount = 4096\n"
        ));
    }
    let e = err(&text);
    assert!(
        e.contains("key `count`") && e.contains("at most 32768"),
        "{e}"
    );
}

#[test]
fn host_periods_and_offsets_are_checked_too() {
    let host = r#"
name = "t"
description = "a test"

[result]
name = "time"
unit = "s"
metric = "completion"

[host]
fs_offset = "1000"

[[files]]
name = "f"
kind = "file"
size = "1m"

[[process]]
name = "p"
kind = "cat"
files = "f"
"#;
    let e = err(host);
    assert!(e.starts_with("my.toml:11: key `host.fs_offset`"), "{e}");
    let tester = host
        .replace("fs_offset = \"1000\"", "fs_offset = \"1m\"")
        .replace(
            "kind = \"cat\"",
            "kind = \"fsync-tester\"\ninterval = \"1ns\"",
        );
    let e = err(&tester);
    assert!(e.starts_with("my.toml:19: key `process.interval`"), "{e}");
    let startup =
        GOOD.to_string() + "\n[[startup]]\nname = \"x\"\ntrace = \"xterm\"\noffset = \"100\"\n";
    let e = err(&startup);
    assert!(e.starts_with("my.toml:19: key `startup.offset`"), "{e}");
    let twice = GOOD.to_string() + "\n[[startup]]\nname = \"reader\"\ntrace = \"xterm\"\n";
    let e = err(&twice);
    assert!(e.starts_with("my.toml:17: key `startup.name`"), "{e}");
}

/// A scenario with a `[[table]]` of every kind of cell: a written figure
/// with its unit, one without, and samples on a column.
const TABLE: &str = r#"
name = "t"
description = "a published table"
schedulers = ["noop", "deadline"]

[result]
name = "time"
unit = "s"
metric = "completion"

[[job]]
name = "reader"
rw = "read"
bs = "128k"
size = "1m"

[[table]]
name = "grid"
thread = "someone-2009"
title = "a grid"
source = "someone, LKML 2009, the table"
job = "reader"
columns = [
  { label = "noop", policy = "noop" },
  { label = "deadline", policy = "deadline" },
]
rows = [
  { label = "time", metric = "completion", unit = "ms", figures = ["1.5 s", "900"] },
  { label = "bytes", metric = "read_bytes", unit = "KiB", figures = ["1024", ""] },
]

[[table]]
name = "lists"
thread = "someone-2009"
title = "samples"
source = "someone, LKML 2009, the lists"
job = "reader"
judge = ["rows"]
unit = "s"
rows = [
  { label = "median", metric = "call:read:median" },
  { label = "max", metric = "call:read:max" },
]
[[table.columns]]
label = "noop"
policy = "noop"
samples = ["0.5", "0.25",
  "1.5"]
"#;

#[test]
fn a_good_table_parses_with_its_figures_in_the_cells_units() {
    let s = Scenario::parse("my.toml", TABLE).unwrap();
    assert_eq!(s.tables.len(), 2);
    let g = &s.tables[0];
    assert_eq!((g.rows.len(), g.columns.len()), (2, 2));
    let cell = |r: usize, c: usize| g.cells[r][c].published.as_ref().map(|f| f.low);
    assert_eq!(cell(0, 0), Some(1500.0), "1.5 s in ms");
    assert_eq!(cell(0, 1), Some(900.0));
    assert_eq!(cell(1, 1), None, "an empty figure is none");
    let l = &s.tables[1];
    assert!(l.judge_rows && !l.judge_columns);
    let median = l.cells[0][0].published.as_ref().unwrap();
    assert_eq!(
        (median.low, median.text.as_str()),
        (0.5, "0.5 (median of 3)")
    );
}

#[test]
fn bad_tables_name_file_line_and_key() {
    let cases = [
        (
            TABLE.replace(
                "unit = \"KiB\", figures",
                "unit = \"KiB\", jb = \"x\", figures",
            ),
            "my.toml:29: key `jb`",
        ),
        (
            TABLE.replace("source = \"someone, LKML 2009, the table\"\n", ""),
            "my.toml:17: key `source`",
        ),
        (
            TABLE.replace("[\"1024\", \"\"]", "[\"1024\"]"),
            "my.toml:29: key `table.rows.figures`",
        ),
        (
            TABLE.replace("\"1.5 s\"", "\"1.5 KB/s\""),
            "my.toml:28: key `table.rows.figures`",
        ),
        (
            TABLE.replace("\"900\"", "\"fast\""),
            "my.toml:28: key `table.rows.figures`",
        ),
        (
            TABLE.replace("policy = \"deadline\" }", "policy = \"bfq\" }"),
            "my.toml:25: key `table.policy`",
        ),
        (
            TABLE.replace("metric = \"read_bytes\"", "metric = \"speed\""),
            "my.toml:29: key `table.metric`",
        ),
        (
            TABLE.replace("unit = \"KiB\"", "unit = \"parsecs\""),
            "my.toml:29: key `table.unit`",
        ),
        (
            TABLE.replace("unit = \"KiB\"", "unit = \"MB/s\""),
            "my.toml:29: key `table.unit`",
        ),
        (
            TABLE.replace(
                "{ label = \"time\",",
                "{ label = \"time\", policy = \"noop\",",
            ),
            "my.toml:28: key `table.rows.policy`",
        ),
        (
            TABLE.replace(
                "{ label = \"noop\", policy = \"noop\" },",
                "{ label = \"noop\" },",
            ),
            "my.toml:28: key `table.rows.policy`",
        ),
        (
            TABLE.replace("metric = \"call:read:max\"", "metric = \"lat_max_ms\""),
            "my.toml:47: key `table.samples`",
        ),
        (
            TABLE.replace("metric = \"call:read:max\"", "metric = \"call:read:p99\""),
            "my.toml:42: key `table.metric`",
        ),
        (
            TABLE.replace("judge = [\"rows\"]", "judge = [\"diagonals\"]"),
            "my.toml:38: key `table.judge`",
        ),
        (
            TABLE.replace("name = \"lists\"", "name = \"grid\""),
            "my.toml:33: key `table.name`",
        ),
        (
            TABLE.replace("job = \"reader\"\ncolumns", "job = \"writer\"\ncolumns"),
            "my.toml:22: key `table.job`",
        ),
        (
            TABLE.replace("job = \"reader\"\ncolumns", "sweep = 4\ncolumns"),
            "my.toml:22: key `table.sweep`",
        ),
        (
            TABLE.replace(
                "title = \"a grid\"",
                "title = \"a grid\"\nresolution = \"64 KB/s\"",
            ),
            "my.toml:21: key `table.resolution`",
        ),
    ];
    for (text, want) in cases {
        assert_ne!(text, TABLE, "the case changed nothing: {want}");
        let got = err(&text);
        assert!(got.starts_with(want), "want {want:?}, got {got:?}");
    }
}

#[test]
fn a_priority_sweep_names_its_job_and_its_points() {
    let sweep = GOOD.to_string() + "\n[sweep]\njob = \"reader\"\nprio = [\"be/4\", \"rt/0\"]\n";
    let s = Scenario::parse("my.toml", &sweep).unwrap();
    assert_eq!(s.sweep_points(), 2);
    let e = err(&sweep.replace("rt/0", "rt/9"));
    assert!(e.starts_with("my.toml:18: key `sweep.prio`"), "{e}");
    let e = err(&sweep.replace("job = \"reader\"\nprio", "job = \"nobody\"\nprio"));
    assert!(e.starts_with("my.toml:17: key `sweep.job`"), "{e}");
}
