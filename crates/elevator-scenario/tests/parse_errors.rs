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
        (
            GOOD.replace(
                "description = \"a test\"",
                "description = \"a test\"\ndisks = 0",
            ),
            "my.toml:4: key `disks`",
        ),
        (
            GOOD.replace(
                "description = \"a test\"",
                "description = \"a test\"\ndisks = 65",
            ),
            "my.toml:4: key `disks`",
        ),
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
