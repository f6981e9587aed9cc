//! The 2003 benchmarks (Andrew Morton, "IO scheduler benchmarking", LKML,
//! 20 Feb 2003) on the simulated 2003 machine: every experiment under
//! noop, deadline, anticipatory, cfq, the first CFQ (cfq-2003) and the 2.4
//! column (linus24 on the 2.4 host), printed beside the seed's figures, with the claims of issues
//! 4 and 7 asserted.

use elevator_metrics::Report;
use elevator_scenario::{builtin, builtins, run, RunOptions};

fn report(name: &str) -> Report {
    let s = builtin(name).expect("built-in").expect("valid");
    run(&s, &RunOptions::default(), &mut |_| {}).expect("runs")
}

fn result(r: &Report, policy: &str) -> f64 {
    r.runs
        .iter()
        .find(|x| x.scheduler == policy)
        .expect("policy ran")
        .result
        .value
}

#[test]
fn every_2003_experiment_prints_ours_beside_the_seed() {
    let names: Vec<&str> = builtins()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| n.starts_with("morton-"))
        .collect();
    assert_eq!(
        names.len(),
        11,
        "ten experiments and the 8 KiB readahead variant"
    );
    println!(
        "{:<4} {:>7} {:>9} {:>18} {:>18} {:>18} {:>18}",
        "exp", "noop", "cfq", "deadline (seed)", "as (seed)", "cfq-2003 (seed)", "2.4 (seed)"
    );
    let (mut compared, mut within) = (0, 0);
    for name in names {
        let r = report(name);
        let mut cell = |p: &str| {
            let run = r
                .runs
                .iter()
                .find(|x| x.scheduler == p)
                .expect("policy ran");
            let seed = run
                .published
                .as_deref()
                .map(|s| s.split(' ').next().unwrap_or(""))
                .unwrap_or("-");
            if let Some((lo, hi)) = seed_range(seed) {
                compared += 1;
                if run.result.value >= lo / 2.0 && run.result.value <= hi * 2.0 {
                    within += 1;
                }
            }
            format!("{:.1} ({seed})", run.result.value)
        };
        let exp = name
            .trim_start_matches("morton-")
            .split('-')
            .next()
            .unwrap_or(name);
        let cells = [
            cell("deadline"),
            cell("anticipatory"),
            cell("cfq-2003"),
            cell("linus24"),
        ];
        println!(
            "{exp:<4} {:>7.1} {:>9.1} {:>18} {:>18} {:>18} {:>18}",
            result(&r, "noop"),
            result(&r, "cfq"),
            cells[0],
            cells[1],
            cells[2],
            cells[3]
        );
        for run in &r.runs {
            assert!(
                run.result.value.is_finite(),
                "{name} {}: no result",
                run.scheduler
            );
        }
    }
    println!(
        "deadline, as, cfq-2003 and 2.4: {within} of {compared} published values matched within 2x"
    );
    assert!(
        compared >= 40,
        "the seed's figures are all read: {compared}"
    );
}

/// The seed's figure as a range: "132.0-133.5" or "14"; `None` for a
/// bound ("> 900") or a missing figure.
fn seed_range(seed: &str) -> Option<(f64, f64)> {
    let (lo, hi) = seed.split_once('-').unwrap_or((seed, seed));
    Some((lo.parse().ok()?, hi.parse().ok()?))
}

#[test]
fn anticipation_wins_the_dependent_read_experiments_many_times_over() {
    // Seed: 17 s against 447 s (deadline) for a tree read during a streaming
    // write; about 45 s against about 230 s for six tree readers. Since the
    // drive reads a minimum ahead after a miss (ide-2003), six readers take
    // about the seed's time under deadline (258 s) while anticipatory stays
    // 1.6-1.9x slow (86 s): 3.0x, not the seed's 4.1-5.3x; 2.5 still asks
    // for "many times over" (README, "Why six tree readers were 3x slow").
    for (name, factor) in [
        ("morton-7-streaming-write-vs-tree-read", 5.0),
        ("morton-5-six-tree-readers", 2.5),
    ] {
        let r = report(name);
        let (a, d, n) = (
            result(&r, "anticipatory"),
            result(&r, "deadline"),
            result(&r, "noop"),
        );
        println!("{name}: anticipatory {a:.1} s, deadline {d:.1} s, noop {n:.1} s");
        assert!(
            a * factor < d && a * factor < n,
            "{name}: as {a} deadline {d} noop {n}"
        );
    }
}

#[test]
fn ten_streaming_readers_run_near_full_bandwidth_under_as_and_2_4() {
    let r = report("morton-1-parallel-streaming-reads");
    for policy in ["anticipatory", "linus24"] {
        let run = r.runs.iter().find(|x| x.scheduler == policy).expect("ran");
        let cats: Vec<&elevator_metrics::JobReport> = run
            .jobs
            .iter()
            .filter(|j| j.name.starts_with("reader"))
            .collect();
        assert_eq!(cats.len(), 10);
        let bytes: u64 = cats.iter().map(|j| j.read_bytes).sum();
        let first = cats
            .iter()
            .filter_map(|j| j.completion_s)
            .fold(f64::MAX, f64::min);
        let last = cats
            .iter()
            .filter_map(|j| j.completion_s)
            .fold(0.0, f64::max);
        let start = cats.iter().map(|j| j.start_s).fold(f64::MAX, f64::min);
        let mb_s = bytes as f64 / 1e6 / (last - start).max(1e-9);
        println!("{policy}: ten cats done {first:.1}-{last:.1} s, {mb_s:.1} MB/s while reading");
        // ide-2003 reads ~35-44 MB/s alone; "near full bandwidth".
        assert!(mb_s > 28.0, "{policy}: {mb_s:.1} MB/s");
    }
}

#[test]
fn the_2_4_column_is_unfair_and_slow_for_dependent_reads() {
    let r = report("morton-1-parallel-streaming-reads");
    let run = r
        .runs
        .iter()
        .find(|x| x.scheduler == "linus24")
        .expect("ran");
    let times: Vec<f64> = run
        .jobs
        .iter()
        .filter(|j| j.name.starts_with("reader"))
        .filter_map(|j| j.completion_s.map(|c| c - j.start_s))
        .collect();
    let first = times.iter().copied().fold(f64::MAX, f64::min);
    let last = times.iter().copied().fold(0.0, f64::max);
    println!(
        "2.4, ten cats: first done after {first:.1} s, last after {last:.1} s (seed 6.1-37.0)"
    );
    assert!(
        last > 3.0 * first,
        "2.4 should be unfair: {first:.1} vs {last:.1}"
    );
    // Seed: > 900 s vs 447 s (tree read during a streaming write), 1890 s
    // vs 219 s (during a streaming read), 45 s vs 5 s (xterm start during a
    // streaming read): a stream holds the 2.4 disk while each read of a
    // dependent reader waits for its passover budget to run out.
    for name in [
        "morton-7-streaming-write-vs-tree-read",
        "morton-9-streaming-read-vs-tree-read",
        "morton-3-streaming-read-vs-interactivity",
    ] {
        let r = report(name);
        let (old, d) = (result(&r, "linus24"), result(&r, "deadline"));
        println!("{name}: 2.4 {old:.1} s vs deadline {d:.1} s");
        assert!(old > 2.0 * d, "{name}: 2.4 {old} vs deadline {d}");
    }
}

/// Experiment 3 under AS: anticipation holds the disk for the streaming
/// `cat`, and each of the xterm's reads, far from it, waits for the FIFO
/// check that comes once per `read_expire`. The 2003 scenarios run AS with
/// the defaults it was merged with (2.5.74, kept through 2.6.1), where
/// `read_expire` is 50 ms ("a request might take anywhere < 100ms"); with
/// 2.6.32's 125 ms the xterm's reads wait about 2.5 times as long.
#[test]
fn as_serves_the_xterm_behind_a_stream_once_per_read_expire() {
    use elevator_sched::policy::anticipatory::DEFAULTS_2003_MS;
    let defaults: std::collections::BTreeMap<String, i64> = DEFAULTS_2003_MS
        .iter()
        .map(|&(k, v)| (k.to_string(), v))
        .collect();
    for (name, _) in builtins()
        .into_iter()
        .filter(|(n, _)| n.starts_with("morton-"))
    {
        let s = builtin(name).expect("built-in").expect("valid");
        assert_eq!(
            s.tunables.get("anticipatory"),
            Some(&defaults),
            "{name} runs AS with its 2003 defaults"
        );
        let rules = s.tunables.get("deadline").and_then(|t| t.get("rules"));
        assert_eq!(
            rules,
            Some(&elevator_sched::policy::deadline::RULES_2_5_61),
            "{name} runs 2.5.61's deadline"
        );
    }
    let xterm_reads = |tunables: Option<&[(&str, i64)]>| {
        let mut s = builtin("morton-3-streaming-read-vs-interactivity")
            .expect("built-in")
            .expect("valid");
        s.schedulers = vec!["anticipatory".to_string()];
        if let Some(t) = tunables {
            s.tunables.insert(
                "anticipatory".to_string(),
                t.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
            );
        }
        let r = run(&s, &RunOptions::default(), &mut |_| {}).expect("runs");
        let xterm = r.runs[0]
            .jobs
            .iter()
            .find(|j| j.name == "xterm")
            .expect("xterm ran")
            .clone();
        (r.runs[0].result.value, xterm.lat_mean_ms)
    };
    let (took, mean) = xterm_reads(None);
    let (took_2632, mean_2632) = xterm_reads(Some(&[
        ("read_expire", 125),
        ("write_expire", 250),
        ("read_batch_expire", 500),
        ("write_batch_expire", 125),
    ]));
    println!(
        "xterm during a cat loop under AS: {took:.2} s, reads {mean:.0} ms on average \
         (2.5.74-2.6.1 defaults); {took_2632:.2} s, {mean_2632:.0} ms (2.6.32's); seed 9 s"
    );
    assert!(mean > 25.0 && mean < 100.0, "read_expire 50: {mean:.0} ms");
    assert!(
        mean_2632 > 125.0 && mean_2632 < 250.0,
        "read_expire 125: {mean_2632:.0} ms"
    );
    assert!(took_2632 > 2.0 * took);
}
