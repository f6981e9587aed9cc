//! Zoccolo's April 2009 deadline-mc thread on the mechanisms its figures
//! rest on, each shown by a run that would fail without it:
//! - 2.6.30's ext3 fsync forces a *synchronous* commit, whose journal writes
//!   go out `WRITE_SYNC_PLUG`, so deadline-mc serves them with reads, not
//!   behind the buffered writer; 2.6.32's fsync leaves them `WRITE`;
//! - ext3's reservation windows keep 32 concurrent writers' files in
//!   4 MiB pieces, which is what CFQ's idling for sequential readers turns
//!   into throughput (on ext2's 8-block interleave it cannot);
//! - nilfs2's writers wait while segctord constructs a log.
//!
//! Runs are shortened (fewer or smaller files, memory scaled with them)
//! where the full ones would take too long under the checker.

use elevator_metrics::Report;
use elevator_scenario::{run, RunOptions, Scenario};

fn scenario_text(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../scenarios/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("{name}.toml: {e}"))
}

/// `text` with each `(from, to)` replaced; each `from` must be there.
fn edited(text: &str, edits: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (from, to) in edits {
        assert!(out.contains(from), "the scenario no longer has {from:?}");
        out = out.replace(from, to);
    }
    out
}

fn run_text(text: &str, schedulers: &[&str]) -> Report {
    let s = Scenario::parse("edited.toml", text).unwrap_or_else(|e| panic!("{e}"));
    let options = RunOptions {
        schedulers: Some(schedulers.iter().map(|s| s.to_string()).collect()),
        ..RunOptions::default()
    };
    run(&s, &options, &mut |_| {}).unwrap()
}

fn extra(report: &Report, policy: &str, job: &str, key: &str) -> f64 {
    let r = report
        .runs
        .iter()
        .find(|r| r.scheduler == policy)
        .unwrap_or_else(|| panic!("no run of {policy}"));
    let j = r.jobs.iter().find(|j| j.name == job).unwrap();
    *j.extra
        .get(key)
        .unwrap_or_else(|| panic!("{policy} {job}: no {key}"))
}

/// The fsync times a policy's run printed (all under load: the tester
/// starts once the writer is throttled).
fn fsync_times(report: &Report, policy: &str) -> Vec<f64> {
    let r = report.runs.iter().find(|r| r.scheduler == policy).unwrap();
    let j = r.jobs.iter().find(|j| j.name == "fsync-tester").unwrap();
    let mut t: Vec<f64> = j
        .output
        .iter()
        .filter_map(|l| l.strip_prefix("fsync time: "))
        .map(|v| v.parse().unwrap())
        .collect();
    t.sort_by(f64::total_cmp);
    t
}

fn median(v: &[f64]) -> f64 {
    assert!(!v.is_empty(), "no fsync times");
    v[v.len() / 2]
}

/// Zoccolo's second claim, and its mechanism: on 2.6.30, deadline-mc's
/// fsync times stay in cfq's range (his: cfq 0.03-0.57 s, deadline-mc
/// mostly under 0.3 s) while deadline's do not; on 2.6.32's fsync, whose
/// commit writes are plain `WRITE`, deadline-mc's commit waits in the async
/// level behind the writer and its fsyncs take seconds. What is left of
/// deadline-mc's fsync is the async batch it waits out between the
/// commit's steps (at least `fifo_batch` writer requests of 512 KiB, about
/// 145 ms on the laptop disk): with 4-request batches and no time quantum
/// its fsyncs shorten.
#[test]
fn deadline_mc_fsync_is_in_cfqs_range_because_2630_commits_synchronously() {
    let text = edited(
        &scenario_text("fsync-tester-2009-ext3"),
        &[("duration = \"60s\"", "duration = \"20s\"")],
    );
    let policies = ["deadline", "cfq-2.6.32", "deadline-mc"];
    let r30 = run_text(&text, &policies);
    let (dl, cfq, mc) = (
        fsync_times(&r30, "deadline"),
        fsync_times(&r30, "cfq-2.6.32"),
        fsync_times(&r30, "deadline-mc"),
    );
    println!("2.6.30: deadline {dl:?}\n cfq {cfq:?}\n deadline-mc {mc:?}");
    // In his cfq's range (0.029-0.572 s), mostly under 0.3 s, and within
    // a few times our cfq's median; deadline's are seconds.
    let mc_max = mc.last().copied().unwrap();
    assert!(
        mc_max < 0.572 && median(&mc) < 0.3 && median(&mc) < 4.0 * median(&cfq),
        "deadline-mc median {} max {mc_max} against cfq's median {}",
        median(&mc),
        median(&cfq)
    );
    // deadline's lie outside his cfq's range (writers that sleep on the
    // shadowed inode block let its sweep wrap, so not 10x any more).
    assert!(
        median(&dl) > 0.572 && median(&dl) > 5.0 * median(&mc),
        "deadline {}",
        median(&dl)
    );

    // The async batch is what deadline-mc's fsync still waits for.
    let short_batches = run_text(
        &edited(
            &text,
            &[(
                "[block]",
                "[sched.\"deadline-mc\"]\nfifo_batch = 4\ntime_quantum = 0\n\n[block]",
            )],
        ),
        &["deadline-mc"],
    );
    let mc4 = fsync_times(&short_batches, "deadline-mc");
    println!("deadline-mc, 4-request batches: {mc4:?}");
    assert!(
        median(&mc4) < 0.7 * median(&mc),
        "4-request batches: {} against {}",
        median(&mc4),
        median(&mc)
    );

    let r32 = run_text(
        &edited(
            &text,
            &[("preset = \"linux-2.6.30\"", "preset = \"linux-2.6.32\"")],
        ),
        &["deadline-mc"],
    );
    let mc32 = fsync_times(&r32, "deadline-mc");
    println!("2.6.32: deadline-mc {mc32:?}");
    assert!(
        median(&mc32) > 1.0 && median(&mc32) > 5.0 * median(&mc),
        "2.6.32's asynchronous commit: {} against {}",
        median(&mc32),
        median(&mc)
    );
}

/// deadline's fsync under the dd writer: each timer commit's log writes
/// (plain `WRITE`, mid-disk, off the writer's ascending sweep) wait in
/// deadline's write FIFO up to `write_expire`, and meanwhile every
/// `write(2)` that modifies its inode sleeps on the shadowed inode block
/// (jbd's `BJ_Shadow`). The writer stops refilling the queue, the sweep
/// runs out and wraps, and the tester's fsync no longer waits out two
/// expiries in a row (Zoccolo: deadline 0.80-4.97 s; without the shadow
/// wait ours were 10.1-19.3 s, median 17.9).
#[test]
fn writers_wait_for_shadowed_inode_blocks_so_deadlines_fsync_wraps() {
    let r = run_text(&scenario_text("fsync-tester-2009-ext3"), &["deadline"]);
    let dl = fsync_times(&r, "deadline");
    let waits = extra(&r, "deadline", "pdflush", "ext3_shadow_waits");
    println!("deadline {dl:?}, {waits} shadow waits");
    assert!(waits > 0.0, "no write(2) met a shadowed inode block");
    assert!(median(&dl) < 10.0, "median {} s", median(&dl));
    assert!(dl[0] < 5.0, "shortest {} s", dl[0]);
}

/// tiotest's sequential read by 32 threads: CFQ's idle window gives each
/// reader its slice, and with ext3's reservation windows each slice reads
/// a 4 MiB piece; deadline's interleaving pays a seek per 128 KiB
/// (Zoccolo: cfq 23.8 MB/s against 15.4 and 15.5). On ext2's 8-block
/// interleave CFQ's slices read 32 KiB pieces and gain little.
#[test]
fn cfq_reads_sequentially_faster_than_deadline_on_ext3s_windows() {
    let short = edited(
        &scenario_text("tiotest-2009-ext3-hdd"),
        &[
            ("size = \"80m\"", "size = \"16m\""),
            ("memory = \"1g\"", "memory = \"200m\""),
        ],
    );
    let rate = |report: &Report, p: &str| extra(report, p, "tiotest", "seq_read_mb_s");
    let ext3 = run_text(&short, &["deadline", "cfq-2.6.32"]);
    let ext2 = run_text(
        &edited(
            &short,
            &[
                ("fs = \"ext3\"", "fs = \"ext2\""),
                ("mount = \"data=writeback\"\n", ""),
            ],
        ),
        &["deadline", "cfq-2.6.32"],
    );
    let (d3, c3) = (rate(&ext3, "deadline"), rate(&ext3, "cfq-2.6.32"));
    let (d2, c2) = (rate(&ext2, "deadline"), rate(&ext2, "cfq-2.6.32"));
    println!("ext3: deadline {d3:.1} cfq {c3:.1} MB/s; ext2: deadline {d2:.1} cfq {c2:.1}");
    assert!(c3 > 1.8 * d3, "ext3: cfq {c3} deadline {d3}");
    assert!(c2 < 1.5 * d2, "ext2: cfq {c2} deadline {d2}");
}

/// nilfs2: a write(2) waits while segctord constructs a log (it holds
/// `ns_segctor_sem` until the log is on the card), so on the SD card
/// tiotest's buffered writes see multi-second stalls (Zoccolo: write
/// maxima 10.2 and 13.3 s, random writes 5.1 and 5.3 s, means 10-14 ms)
/// though dirty memory never nears its limit.
#[test]
fn nilfs2_writers_wait_for_the_segment_constructor() {
    let short = edited(
        &scenario_text("tiotest-2009-nilfs2-sdcard"),
        &[
            ("threads = 16", "threads = 4"),
            ("size = \"80m\"", "size = \"8m\""),
        ],
    );
    let report = run_text(&short, &["deadline-mc"]);
    let get = |k: &str| extra(&report, "deadline-mc", "tiotest", k);
    let (avg, max, seq_max) = (
        get("rand_write_lat_avg_ms"),
        get("rand_write_lat_max_ms"),
        get("seq_write_lat_max_ms"),
    );
    println!("random write mean {avg:.2} ms, max {max:.0} ms; write max {seq_max:.0} ms");
    assert!(max >= 1000.0 && seq_max >= 1000.0, "{max} {seq_max}");
    assert!(avg >= 1.0, "{avg}");
}

/// His fourth list ran the tester under `ionice -c1`. The scenario's
/// priority sweep reaches the requests (cfq-2.6.32 puts the tester's sync
/// writes in an RT queue, and its times move), while deadline-mc, as the
/// cover letter defines its levels ("syncronous operations (either best
/// effort reads or RT/BE writes)"), files an RT sync write exactly where a
/// best-effort one goes: the tester only writes, so its times do not move.
/// His two deadline-mc lists (medians 0.060 and 0.050 s) differ no more
/// than two runs of one setting do.
#[test]
fn ionice_c1_moves_cfqs_fsync_but_not_deadline_mcs() {
    let text = edited(
        &scenario_text("fsync-tester-2009-ext3"),
        &[("duration = \"60s\"", "duration = \"20s\"")],
    );
    let s = Scenario::parse("edited.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    let options = RunOptions {
        schedulers: Some(vec!["cfq-2.6.32".into(), "deadline-mc".into()]),
        ..RunOptions::default()
    };
    let report = run(&s, &options, &mut |_| {}).unwrap();
    let times = |policy: &str, rt: bool| -> Vec<f64> {
        let r = report
            .runs
            .iter()
            .find(|r| {
                r.scheduler == policy
                    && r.variant.as_deref().is_some_and(|v| v.contains("rt/4")) == rt
            })
            .unwrap_or_else(|| panic!("no run of {policy} (rt {rt})"));
        let j = r.jobs.iter().find(|j| j.name == "fsync-tester").unwrap();
        j.output
            .iter()
            .filter_map(|l| l.strip_prefix("fsync time: "))
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let (cfq_be, cfq_rt) = (times("cfq-2.6.32", false), times("cfq-2.6.32", true));
    let (mc_be, mc_rt) = (times("deadline-mc", false), times("deadline-mc", true));
    println!("cfq {cfq_be:?}\n cfq rt {cfq_rt:?}\n mc {mc_be:?}\n mc rt {mc_rt:?}");
    assert!(!cfq_be.is_empty() && !mc_be.is_empty());
    assert_ne!(cfq_be, cfq_rt, "the sweep does not reach cfq-2.6.32");
    assert_eq!(mc_be, mc_rt);
}
