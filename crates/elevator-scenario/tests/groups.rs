//! BFQ's hierarchical scheduling on the simulated disk: the 2009
//! IO-controller threads' random-vs-sequential groups test (a group of
//! random readers must not take the disk from a group with one sequential
//! reader at equal weight, however many readers it has), and issue 5's
//! weights 100:200 with one task against four. Each test prints its table.

use elevator_metrics::{GroupReport, RunReport};
use elevator_scenario::{run, RunOptions};

fn builtin_runs(name: &str, scheds: &[&str]) -> Vec<RunReport> {
    let scenario = elevator_scenario::builtin(name).unwrap().unwrap();
    let options = RunOptions {
        schedulers: Some(scheds.iter().map(|s| s.to_string()).collect()),
        ..RunOptions::default()
    };
    run(&scenario, &options, &mut |_| {}).unwrap().runs
}

fn group<'a>(run: &'a RunReport, name: &str) -> &'a GroupReport {
    run.groups
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no group {name}"))
}

/// The table of the 2009 threads: per run, the random group's tasks, then
/// per group aggregate MB/s, max latency (ms) and IOPS, and the disk share.
fn print_random_vs_sequential(runs: &[RunReport]) {
    println!(
        "{:<9} {:>5} | {:>12} {:>12} {:>8} {:>6} | {:>12} {:>12} {:>8} {:>6}",
        "policy",
        "rand",
        "random MB/s",
        "max lat ms",
        "IOPS",
        "disk",
        "seq MB/s",
        "max lat ms",
        "IOPS",
        "disk"
    );
    for r in runs {
        let (rnd, seq) = (group(r, "random"), group(r, "sequential"));
        println!(
            "{:<9} {:>5} | {:>12.2} {:>12.1} {:>8.0} {:>5.0}% | {:>12.1} {:>12.1} {:>8.0} {:>5.0}%",
            r.scheduler,
            rnd.tasks,
            rnd.mb_s,
            rnd.lat_max_ms,
            rnd.iops,
            rnd.disk_share * 100.0,
            seq.mb_s,
            seq.lat_max_ms,
            seq.iops,
            seq.disk_share * 100.0
        );
    }
}

#[test]
fn a_sequential_group_keeps_its_half_of_the_disk_against_any_number_of_random_readers() {
    let runs = builtin_runs("group-random-vs-sequential", &["bfq", "deadline"]);
    print_random_vs_sequential(&runs);
    for r in runs.iter().filter(|r| r.scheduler == "bfq") {
        let seq = group(r, "sequential");
        assert!(
            seq.disk_share >= 0.40,
            "{}: the sequential group got {:.1} % of the disk",
            r.label(),
            seq.disk_share * 100.0
        );
    }
    // Without groups in the policy the crowd wins: deadline's sequential
    // reader loses its share as the random group grows.
    let last = runs.iter().rfind(|r| r.scheduler == "deadline").unwrap();
    assert!(group(last, "sequential").disk_share < 0.40);
}

#[test]
fn groups_weighted_100_and_200_get_bandwidth_1_to_2_with_one_task_against_four() {
    let runs = builtin_runs("group-weights-1-vs-4", &["bfq", "deadline"]);
    for r in &runs {
        let (light, heavy) = (group(r, "w100"), group(r, "w200"));
        println!(
            "sata-hdd {}: weight 100, {} task: {:.1} MB/s; weight 200, {} tasks: {:.1} MB/s; ratio {:.3}",
            r.scheduler,
            light.tasks,
            light.mb_s,
            heavy.tasks,
            heavy.mb_s,
            heavy.bytes as f64 / light.bytes as f64
        );
    }
    let bfq = &runs[0];
    let ratio = group(bfq, "w200").bytes as f64 / group(bfq, "w100").bytes as f64;
    assert!(
        (ratio / 2.0 - 1.0).abs() < 0.05,
        "bfq: groups' bandwidth ratio {ratio:.3}, want 2 within 5%"
    );
    // Inside the heavy group the four readers share alike.
    let four: Vec<f64> = bfq
        .jobs
        .iter()
        .filter(|j| j.name.starts_with("four."))
        .map(|j| j.bytes as f64)
        .collect();
    let (lo, hi) = four
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &b| (lo.min(b), hi.max(b)));
    assert!(hi / lo < 1.10, "the four readers got {four:?}");
}
