//! The host sections of scenario files: errors that name file, line and
//! key; every built-in scenario runs; same seed, same bytes.

use elevator_core::Duration;
use elevator_scenario::{run, RunOptions, Scenario};

const HOSTED: &str = r#"
name = "h"
description = "a hosted test"

[result]
name = "time"
unit = "s"
metric = "completion"
job = "reader"

[host]
memory = "256m"
dirty_ratio = 40

[[files]]
name = "big"
kind = "file"
size = "20m"

[[files]]
name = "foo"
kind = "empty"

[[process]]
name = "writer"
kind = "dd"
files = "foo"
bs = "1m"
size = "64m"
background = true

[[process]]
name = "reader"
kind = "cat"
files = "big"
start = "1s"
"#;

fn err(text: &str) -> String {
    Scenario::parse("my.toml", text).unwrap_err().to_string()
}

#[test]
fn a_hosted_file_parses_and_runs() {
    let s = Scenario::parse("my.toml", HOSTED).unwrap();
    let h = s.host.as_ref().unwrap();
    assert_eq!((h.files.len(), h.processes.len()), (2, 2));
    let report = run(&s, &RunOptions::default(), &mut |_| {}).unwrap();
    for r in &report.runs {
        println!(
            "{}: cat of 20 MB under a dd loop: {:.2} s",
            r.scheduler, r.result.value
        );
        assert!(r.result.value.is_finite() && r.result.value > 0.0);
    }
}

#[test]
fn bad_host_values_name_file_line_and_key() {
    let cases = [
        (
            HOSTED.replace("memory = \"256m\"", "memory = \"lots\""),
            "my.toml:12: key `host.memory`",
        ),
        (
            HOSTED.replace("dirty_ratio = 40", "dirty_ratio = 140"),
            "my.toml:13: key `host.dirty_ratio`",
        ),
        (
            HOSTED.replace("memory = \"256m\"", "preset = \"linux-1.0\""),
            "my.toml:12: key `host.preset`",
        ),
        (
            HOSTED.replace("kind = \"file\"", "kind = \"fifo\""),
            "my.toml:17: key `files.kind`",
        ),
        (
            HOSTED.replace("size = \"20m\"", "size = \"0\""),
            "my.toml:18: key `files.size`",
        ),
        (
            HOSTED.replace("kind = \"dd\"", "kind = \"rsync\""),
            "my.toml:26: key `process.kind`",
        ),
        (
            HOSTED.replace("files = \"foo\"", "files = \"bar\""),
            "my.toml:27: key `process.files`",
        ),
        (
            HOSTED.replace("files = \"big\"", "files = \"foo\"\nthreads = 4"),
            "my.toml:36: key `process.threads`",
        ),
        (
            HOSTED.replace("start = \"1s\"", "start = \"soon\""),
            "my.toml:36: key `process.start`",
        ),
        (
            HOSTED.replace("bs = \"1m\"", "bs = \"0\""),
            "my.toml:28: key `process.bs`",
        ),
        (
            HOSTED.replace("job = \"reader\"", "job = \"nobody\""),
            "my.toml:8: key `result`",
        ),
    ];
    for (text, want) in cases {
        let e = err(&text);
        println!("{e}");
        assert!(e.starts_with(want), "got {e:?}, want {want:?}");
    }
}

#[test]
fn a_scenario_of_background_processes_only_is_refused() {
    let e = err(&HOSTED.replace("start = \"1s\"", "start = \"1s\"\nbackground = true"));
    assert!(e.contains("not `background`"), "{e}");
}

#[test]
fn same_seed_same_bytes_with_a_host() {
    let s = Scenario::parse("my.toml", HOSTED).unwrap();
    let once = run(&s, &RunOptions::default(), &mut |_| {})
        .unwrap()
        .to_json();
    let twice = run(&s, &RunOptions::default(), &mut |_| {})
        .unwrap()
        .to_json();
    assert_eq!(once, twice);
    let tree = elevator_scenario::builtin("morton-9-streaming-read-vs-tree-read")
        .unwrap()
        .unwrap();
    let a = run(&tree, &RunOptions::default(), &mut |_| {})
        .unwrap()
        .to_json();
    let b = run(&tree, &RunOptions::default(), &mut |_| {})
        .unwrap()
        .to_json();
    assert_eq!(a, b);
}

/// Every built-in scenario runs under noop and deadline, within a time
/// limit, and gives a finite headline figure.
#[test]
fn every_builtin_scenario_runs_under_noop_and_deadline() {
    let options = RunOptions {
        schedulers: Some(vec!["noop".into(), "deadline".into()]),
        ..RunOptions::default()
    };
    for (name, _) in elevator_scenario::builtins() {
        let mut s = elevator_scenario::builtin(name).unwrap().unwrap();
        s.time_limit = s.time_limit.min(Duration::from_secs(1200));
        let report = run(&s, &options, &mut |_| {}).unwrap();
        for r in &report.runs {
            println!(
                "{name:<44} {:<9} {:>9.2} {}   published: {}",
                r.scheduler,
                r.result.value,
                r.result.unit,
                r.published.as_deref().unwrap_or("-")
            );
            assert!(
                r.result.value.is_finite(),
                "{name} under {}: {}",
                r.scheduler,
                r.result.value
            );
        }
    }
}

#[test]
fn on_the_2_4_host_the_dirty_ratios_set_bdflush() {
    use elevator_host::params::{Bdflush, Writeback};
    let text = HOSTED.replace(
        "dirty_ratio = 40",
        "preset = \"linux-2.4\"\ndirty_ratio = 50\ndirty_background_ratio = 25",
    );
    let s = Scenario::parse("my.toml", &text).unwrap();
    let p = &s.host.as_ref().unwrap().params;
    assert_eq!(
        p.writeback,
        Writeback::Bdflush(Bdflush {
            nfract: 25,
            nfract_sync: 50,
            ..Bdflush::default()
        })
    );
}
