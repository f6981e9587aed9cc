//! Righi's 2009 io-throttle experiments on the MTRON SSD
//! (seeds/goyal-righi-2009-io-controllers.txt).
//!
//! With io-throttle (`bandwidth-max=10m:0 iops-max=2150:1` per group,
//! under noop) each group reads at the limit that binds its request size:
//! 1 MiB reads at the leaky 10 MiB/s, 4 KiB reads at the token bucket's
//! 2150 a second plus the second of credit it starts with, spent over the
//! 30 s run (his 8883-8889 KiB/s). Without limits (2.6.32-rc5's default,
//! CFQ) his random reader beside 2-8 sequential tasks all but stops
//! (4865 -> 98 KiB/s), while random readers together read no faster than
//! one alone; both are CFQ's doing, not the drive's.

use elevator_metrics::Report;
use elevator_scenario::{builtin, run, RunOptions, Scenario};

const RBPS: f64 = 10.0 * 1024.0 * 1024.0;
const RIOPS: f64 = 2150.0;
/// The token bucket's size over the run: one second of the limit in 30 s.
const BURST: f64 = 31.0 / 30.0;

fn report(name: &str) -> Report {
    let scenario: Scenario = builtin(name).expect("built-in").expect("valid");
    run(&scenario, &RunOptions::default(), &mut |_| {}).expect("runs")
}

/// A group's name, bytes/s and IOPS.
type Group = (String, f64, f64);

/// (group 1 tasks, both groups) per sweep point, for `policy`.
fn rows(r: &Report, policy: &str) -> Vec<(usize, Vec<Group>)> {
    r.runs
        .iter()
        .filter(|run| run.scheduler == policy)
        .map(|run| {
            let g1 = run.groups.iter().find(|g| g.name == "g1").expect("g1");
            let groups = ["g1", "g2"]
                .iter()
                .map(|n| {
                    let g = run.groups.iter().find(|g| g.name == *n).expect("group");
                    (n.to_string(), g.mb_s * 1e6, g.iops)
                })
                .collect();
            (g1.tasks, groups)
        })
        .collect()
}

const PAIRS: [&str; 4] = ["seq-vs-seq", "seq-vs-rand", "rand-vs-seq", "rand-vs-rand"];

#[test]
fn each_limited_group_reads_at_its_binding_io_throttle_limit() {
    for pair in PAIRS {
        let name = format!("io-throttle-2009-{pair}");
        let rows = rows(&report(&name), "noop");
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            [1, 2, 4, 8],
            "{name}"
        );
        for (n, groups) in &rows {
            for (g, bytes_s, iops) in groups {
                println!(
                    "{name} nr={n} {g}: {:.0} KiB/s {iops:.0} IOPS",
                    bytes_s / 1024.0
                );
                // 4 KiB readers: the I/O limit with its bucket; 1 MiB
                // readers: the bandwidth, which saves no credit.
                let (got, cap) = if *iops > 100.0 {
                    (*iops, RIOPS * BURST)
                } else {
                    (*bytes_s, RBPS)
                };
                assert!(
                    (got - cap).abs() <= 0.01 * cap,
                    "{name} nr={n} {g}: {got:.0} against {cap:.0}"
                );
            }
        }
    }
}

#[test]
fn without_limits_cfq_starves_the_random_reader_beside_sequential_tasks() {
    let r = report("io-throttle-2009-seq-vs-rand-unlimited");
    let cfq = rows(&r, "cfq-2.6.32");
    let victim: Vec<f64> = cfq.iter().map(|(_, g)| g[1].1 / 1024.0).collect();
    println!("random reader beside 1, 2, 4, 8 sequential tasks: {victim:.0?} KiB/s");
    // His 4865, 965, 484, 98 KiB/s: a 50-fold fall; a fair share of time
    // would lose only a factor (8 + 1) / (1 + 1).
    assert!(victim[3] < victim[0] / 6.0, "{victim:?}");
    for w in victim.windows(2) {
        assert!(w[1] < w[0], "{victim:?}");
    }
}

#[test]
fn without_limits_random_readers_together_read_as_one_under_cfq_not_noop() {
    let r = report("io-throttle-2009-rand-vs-rand-unlimited");
    let total = |rows: &[(usize, Vec<Group>)]| -> Vec<f64> {
        rows.iter().map(|(_, g)| (g[0].1 + g[1].1) / 1e6).collect()
    };
    let cfq = total(&rows(&r, "cfq-2.6.32"));
    let noop = total(&rows(&r, "noop"));
    println!("rand-vs-rand totals, MB/s: cfq {cfq:.1?}, noop {noop:.1?}");
    // His totals: 12.8, 12.9, 12.7, 12.6 MB/s for 2 to 9 readers: CFQ
    // idles on each in turn; with noop their think times overlap.
    for (c, n) in cfq.iter().zip(&noop) {
        assert!((10.0..=15.0).contains(c), "cfq {c}");
        assert!(*n > c * 1.3, "noop {n} vs cfq {c}");
    }
}
