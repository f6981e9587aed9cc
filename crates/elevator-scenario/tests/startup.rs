//! Issue 5's must-show on start-up latency and soft real-time playback:
//! the 2016 BFQ cover letter's table (start-up of xterm, LibreOffice Writer
//! and gnome-terminal, replayed from the S suite's real traces, while ten
//! sequential or ten random readers run), and a 25 frame/s player against
//! five readers and five writers. Both print their tables.
//!
//! The traces are read from `../shared/traces/startup/` beside the
//! repository; without them the start-up test fails, unless
//! `ELEVATOR_SKIP_SHARED=1` says to skip it.

use elevator_core::shared::shared_present;
use elevator_scenario::letter::{
    run_letter, Background, LetterOptions, APPS, LETTER_DEVICE, TIMEOUT_S,
};
use elevator_scenario::{run, RunOptions};
use std::path::PathBuf;

fn trace_dir() -> PathBuf {
    // crates/elevator-scenario → the repository root → its sibling `shared`.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/startup")
}

fn traces_present() -> bool {
    let dir = trace_dir();
    APPS.iter()
        .all(|&(_, trace, _)| shared_present(&dir.join(format!("{trace}.trace"))))
}

/// `None` (over the timeout) counts as the timeout itself.
fn or_timeout(t: Option<f64>) -> f64 {
    t.unwrap_or(TIMEOUT_S)
}

#[test]
fn bfq_starts_applications_as_on_an_idle_device_with_the_readers_throughput_kept() {
    if !traces_present() {
        return;
    }
    let options = LetterOptions::default();
    let report = run_letter(&options, &mut |_| {}).unwrap();
    println!("{}", report.to_table());
    let others: Vec<&String> = options.schedulers.iter().filter(|s| *s != "bfq").collect();
    let mut failures = Vec::new();
    for d in &report.devices {
        for &(row, _, name) in &APPS {
            let think = report.think_s[row];
            let idle = d
                .startup(Background::Idle, row, "bfq")
                .expect("idle start-up");
            let bfq = d
                .startup(Background::Sequential, row, "bfq")
                .expect("bfq start-up within the timeout");
            println!(
                "{} {name}: idle {idle:.2} s, bfq with 10 seq readers {bfq:.2} s ({:.2}x idle); think time {think:.2} s",
                d.device,
                bfq / idle
            );
            // Within 3x of the idle-device start-up.
            if bfq > 3.0 * idle {
                failures.push(format!(
                    "{} {name}: bfq {bfq:.2} s > 3 x idle {idle:.2} s",
                    d.device
                ));
            }
            for s in &others {
                let other = or_timeout(d.startup(Background::Sequential, row, s));
                let ratio = other / bfq;
                println!("    vs {s}: {other:.2} s, {ratio:.1}x bfq's start-up");
                // At least 5x below each other policy.
                if ratio < 5.0 {
                    failures.push(format!(
                        "{} {name}: {s} {other:.2} s is only {ratio:.1}x bfq's {bfq:.2} s",
                        d.device
                    ));
                }
            }
        }
        for bg in [Background::Sequential, Background::Random] {
            let bfq = d.throughput(bg, "bfq").unwrap();
            let best = others
                .iter()
                .filter_map(|s| d.throughput(bg, s))
                .fold(0.0, f64::max);
            println!(
                "{} {bg:?} readers alone: bfq {bfq:.1} MiB/s, best other {best:.1} MiB/s",
                d.device
            );
            if bfq < 0.9 * best {
                failures.push(format!(
                    "{} {bg:?} readers: bfq {bfq:.1} MiB/s < 90% of {best:.1}",
                    d.device
                ));
            }
            // And while the applications start, when BFQ idles for them
            // (sequential readers only: ten random readers get 1 MiB/s out
            // of the disk, of which the application's own reads are a
            // large part).
            if bg == Background::Random {
                continue;
            }
            let during = |s: &str| d.throughput_during.get(&(bg, s.to_string())).copied();
            let bfq = during("bfq").unwrap();
            let best = others.iter().filter_map(|s| during(s)).fold(0.0, f64::max);
            println!(
                "{} {bg:?} readers while apps start: bfq {bfq:.1} MiB/s, best other {best:.1} MiB/s",
                d.device
            );
            if bfq < 0.9 * best {
                failures.push(format!(
                    "{} {bg:?} readers while apps start: bfq {bfq:.1} MiB/s < 90% of {best:.1}",
                    d.device
                ));
            }
        }
    }
    // The think-time calibration (bfq-startup-seq.toml): with the disk
    // nearly idle (deadline, ten random readers on the letter's SSD) xterm
    // and Writer start within 20% of the letter's times.
    if let Some(d) = report.device(LETTER_DEVICE) {
        for (row, letter) in [("xterm", 0.21), ("oowriter", 0.80)] {
            let ours = or_timeout(d.startup(Background::Random, row, "deadline"));
            println!("calibration: {row} under deadline with random readers {ours:.2} s (letter {letter})");
            if (ours / letter - 1.0).abs() > 0.2 {
                failures.push(format!(
                    "calibration: {row} {ours:.2} s is not within 20% of the letter's {letter} s"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_media_player_misses_no_frame_under_bfq_against_readers_and_writers() {
    let scenario = elevator_scenario::builtin("bfq-media-player")
        .unwrap()
        .unwrap();
    for device in ["sata-hdd", "ssd-sata-2016"] {
        let options = RunOptions {
            device: Some(device.into()),
            schedulers: Some(
                ["bfq", "cfq", "deadline", "noop"]
                    .iter()
                    .filter(|s| elevator_sched::find(s).is_some())
                    .map(|s| s.to_string())
                    .collect(),
            ),
            ..RunOptions::default()
        };
        let report = run(&scenario, &options, &mut |_| {}).unwrap();
        for r in &report.runs {
            let player = r.jobs.iter().find(|j| j.name == "player").unwrap();
            println!(
                "{device} {}: {} of {} frames missed, frame read latency mean {:.1} ms max {:.1} ms; background {:.1} MB/s",
                r.scheduler,
                player.extra["frames_missed"],
                player.extra["frames"],
                player.lat_mean_ms,
                player.lat_max_ms,
                r.aggregate_mb_s
            );
        }
        let bfq = report.runs.iter().find(|r| r.scheduler == "bfq").unwrap();
        let player = bfq.jobs.iter().find(|j| j.name == "player").unwrap();
        // 20 s at 25 frames/s, less the first frame's wait (playback
        // starts when it is in).
        assert!(
            player.extra["frames"] >= 490.0,
            "{device}: too few frames played"
        );
        assert_eq!(
            player.extra["frames_missed"], 0.0,
            "{device}: bfq missed frames"
        );
    }
}
