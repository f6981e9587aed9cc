//! The 2009 file systems in scenario files: `[host] fs` and `mount` are
//! validated with errors naming file, line and key; the three 2009
//! scenarios run on the file systems they name.

use elevator_scenario::{run, RunOptions, Scenario};

fn hosted(host_keys: &str) -> String {
    format!(
        r#"
name = "h"
description = "a hosted test"

[result]
name = "time"
unit = "s"
metric = "completion"
job = "w"

[host]
{host_keys}

[[process]]
name = "w"
kind = "write-and-fsync"
size = "4m"
"#
    )
}

fn err(host_keys: &str) -> String {
    Scenario::parse("my.toml", &hosted(host_keys))
        .unwrap_err()
        .to_string()
}

#[test]
fn fs_and_mount_errors_name_file_line_and_key() {
    let e = err("fs = \"xfs\"");
    assert!(e.contains("my.toml:12") && e.contains("host.fs"), "{e}");
    assert!(e.contains("ext2, ext3, nilfs2"), "{e}");
    let e = err("fs = \"ext3\"\nmount = \"data=sloppy\"");
    assert!(e.contains("my.toml:13") && e.contains("host.mount"), "{e}");
    assert!(
        e.contains("data=ordered, data=writeback or data=journal"),
        "{e}"
    );
    let e = err("mount = \"data=ordered\"");
    assert!(e.contains("host.mount") && e.contains("host.fs"), "{e}");
    let e = err("fs = \"ext3\"\nmount = \"commit=0\"");
    assert!(e.contains("commit"), "{e}");
    let e = err("fs = \"nilfs2\"\nmount = \"data=ordered\"");
    assert!(e.contains("nilfs2") && e.contains("host.mount"), "{e}");
    for ok in [
        "fs = \"ext2\"",
        "fs = \"ext3\"\nmount = \"data=journal,commit=1\"",
        "fs = \"nilfs2\"",
    ] {
        Scenario::parse("my.toml", &hosted(ok)).unwrap();
    }
}

/// fsync-tester on ext3 data=writeback during a sequential writer: every
/// fsync forces a commit of the journal (none had committed it yet), and
/// each policy gets its fsync times.
#[test]
fn fsync_tester_2009_commits_the_journal_on_every_fsync() {
    let s = elevator_scenario::builtin("fsync-tester-2009-ext3")
        .unwrap()
        .unwrap();
    let report = run(&s, &RunOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(report.runs.len(), 3 * s.sweep_points());
    for r in &report.runs {
        let tester = r.jobs.iter().find(|j| j.name == "fsync-tester").unwrap();
        let pdflush = r.jobs.iter().find(|j| j.name == "pdflush").unwrap();
        let fsyncs = tester.extra["fsyncs"];
        let by_fsync = pdflush
            .extra
            .get("ext3_commits_by_fsync")
            .copied()
            .unwrap_or(0.0);
        println!(
            "{}: {fsyncs} fsyncs, longest {:.3} s, {by_fsync} commits forced by fsync, {} in all",
            r.scheduler, tester.extra["fsync_max_s"], pdflush.extra["ext3_commits"]
        );
        assert!(fsyncs >= 1.0);
        assert!(
            by_fsync >= 1.0 && by_fsync <= fsyncs,
            "{by_fsync} of {fsyncs}"
        );
    }
}

/// The nilfs2 scenario writes through segctord's log only: the flusher
/// writes nothing, and the log carries at least every byte tiotest wrote
/// (a shortened run: 4 threads x 8 MB).
#[test]
fn tiotest_on_nilfs2_writes_only_through_the_log() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/tiotest-2009-nilfs2-sdcard.toml"
    ))
    .unwrap();
    let short = text
        .replace("threads = 16", "threads = 4")
        .replace("size = \"80m\"", "size = \"8m\"");
    assert_ne!(
        short, text,
        "the scenario still has the keys this test shortens"
    );
    let s = Scenario::parse("short.toml", &short).unwrap_or_else(|e| panic!("{e}"));
    let options = RunOptions {
        schedulers: Some(vec!["deadline".into()]),
        ..RunOptions::default()
    };
    let report = run(&s, &options, &mut |_| {}).unwrap();
    let r = &report.runs[0];
    let pdflush = r.jobs.iter().find(|j| j.name == "pdflush").unwrap();
    let tiotest = r.jobs.iter().find(|j| j.name == "tiotest").unwrap();
    assert_eq!(
        pdflush.write_bytes, 0,
        "the flusher cannot write nilfs2 pages"
    );
    let log_bytes = pdflush.extra["nilfs2_log_blocks"] * 4096.0;
    let written = tiotest.write_bytes as f64;
    println!("tiotest wrote {written} bytes; the log {log_bytes}");
    assert!(log_bytes >= 4.0 * 8.0 * 1048576.0, "{log_bytes}");
    assert!(pdflush.extra["nilfs2_checkpoints"] >= 1.0);
}
