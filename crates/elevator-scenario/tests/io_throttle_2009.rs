//! Righi's 2009 io-throttle experiments on the MTRON SSD: with io.max at
//! 10 MiB/s and 2150 IOPS per group each group reads at the limit that binds
//! its request size (1 MiB: the bandwidth, 10 I/Os a second; 4 KiB: the
//! IOPS, 8.8 MB/s) whatever its task count; without limits the groups run
//! far over both, and group 1's share grows with its tasks.

use elevator_metrics::Report;
use elevator_scenario::{builtin, run, RunOptions, Scenario};

/// The cap of each group, from the scenario's `io.max` line (his 10 MB/s
/// of io-throttle, which are MiB/s).
const RBPS: f64 = 10_485_760.0;
const RIOPS: f64 = 2150.0;

fn report(name: &str) -> Report {
    let scenario: Scenario = builtin(name).expect("built-in").expect("valid");
    run(&scenario, &RunOptions::default(), &mut |_| {}).expect("runs")
}

/// A group's name, bytes/s and IOPS.
type Group = (String, f64, f64);

/// (group 1 tasks, both groups) per sweep point.
fn rows(r: &Report) -> Vec<(usize, Vec<Group>)> {
    r.runs
        .iter()
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
fn each_limited_group_reads_at_its_binding_limit_whatever_its_task_count() {
    for pair in PAIRS {
        let name = format!("io-throttle-2009-{pair}");
        let rows = rows(&report(&name));
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            [1, 2, 4, 8],
            "{name}"
        );
        for (n, groups) in &rows {
            for (g, bytes_s, iops) in groups {
                println!(
                    "{name} nr={n} {g}: {:.2} MB/s {iops:.0} IOPS",
                    bytes_s / 1e6
                );
                // Never over either cap (a slice's rounding at most).
                assert!(*bytes_s <= RBPS * 1.01, "{name} nr={n} {g}: {bytes_s}");
                assert!(*iops <= RIOPS * 1.01, "{name} nr={n} {g}: {iops}");
                // And at the one that binds, within 3 %.
                let (got, cap) = if *iops * 4096.0 >= RBPS * 0.5 {
                    (*iops, RIOPS)
                } else {
                    (*bytes_s, RBPS)
                };
                assert!(
                    (got - cap).abs() <= 0.03 * cap,
                    "{name} nr={n} {g}: {got:.0} against a cap of {cap:.0}"
                );
            }
        }
    }
}

#[test]
fn without_limits_the_groups_run_over_the_caps_and_follow_the_task_count() {
    for pair in PAIRS {
        let name = format!("io-throttle-2009-{pair}-unlimited");
        let rows = rows(&report(&name));
        let over = rows.iter().any(|(_, groups)| {
            groups
                .iter()
                .any(|(_, bytes_s, iops)| *bytes_s > RBPS * 1.5 || *iops > RIOPS * 1.5)
        });
        assert!(over, "{name}: no group ran over the caps");
        // Group 1's share of the I/Os grows with its task count (noop
        // serves the requests in arrival order, one per task in flight).
        let share = |groups: &[Group]| groups[0].2 / (groups[0].2 + groups[1].2);
        let first = share(&rows[0].1);
        let last = share(&rows[3].1);
        println!("{name}: group 1's share of I/Os {first:.2} at nr=1, {last:.2} at nr=8");
        assert!(last > first + 0.2, "{name}: {first:.2} -> {last:.2}");
    }
}
