//! Issue 7: Andrea Arcangeli's claim that limiting the I/O in flight fixes
//! 2.4's read latency under a streaming write, weighed with numbers.

use elevator_scenario::{builtin, run, RunOptions};

#[test]
fn a_small_inflight_limit_cuts_2_4_read_latency_at_a_throughput_cost() {
    let scenario = builtin("lowlatency-24").expect("built-in").expect("valid");
    let report = run(&scenario, &RunOptions::default(), &mut |_| {}).expect("runs");
    let figures: Vec<(String, f64, f64, f64)> = report
        .runs
        .iter()
        .map(|r| {
            let job = |n: &str| r.jobs.iter().find(|j| j.name == n).expect("job");
            let reader = job("reader");
            (
                r.variant.clone().unwrap_or_default(),
                reader.lat_mean_ms,
                reader.lat_max_ms,
                job("writer").mb_s,
            )
        })
        .collect();
    println!(
        "linus24 on the 2.4 block layer, ide-2003: dependent 64 KiB reader vs streaming writer"
    );
    println!(
        "  {:<22} {:>14} {:>14} {:>12}",
        "", "read mean ms", "read max ms", "writer MB/s"
    );
    for (v, mean, max, w) in &figures {
        println!("  {v:<22} {mean:>14.1} {max:>14.1} {w:>12.2}");
    }
    let (before, after) = (&figures[0], &figures[figures.len() - 1]);
    assert!(before.0.contains("max") && after.0.contains("64k"));
    assert!(
        after.2 * 5.0 < before.2,
        "max read latency {:.1} -> {:.1} ms: not a large factor",
        before.2,
        after.2
    );
    assert!(
        after.1 * 5.0 < before.1,
        "mean read latency did not drop by a large factor"
    );
    println!(
        "read latency: max {:.1}x, mean {:.1}x lower; writer keeps {:.0}% of its bandwidth",
        before.2 / after.2,
        before.1 / after.1,
        100.0 * after.3 / before.3
    );
}
