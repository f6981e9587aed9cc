//! Issue 4: seventeen processes, one per I/O priority, with direct sync I/O
//! and with asynchronous I/O (32 in flight, 80/20 read/write). Under CFQ
//! the class decides who uses the disk and the level how much: RT takes
//! almost all, falling from level 0 to 7 with no level at zero; BE and IDLE
//! get very little.

use elevator_scenario::{builtin, run, RunOptions};

const ORDER: [&str; 17] = [
    "rt0", "rt1", "rt2", "rt3", "rt4", "rt5", "rt6", "rt7", "be0", "be1", "be2", "be3", "be4",
    "be5", "be6", "be7", "idle",
];

fn check(scenario: &str) {
    let s = builtin(scenario).expect("built-in").expect("valid");
    let report = run(&s, &RunOptions::default(), &mut |_| {}).expect("runs");
    println!(
        "{scenario} on {}: KiB read / written per process",
        report.device
    );
    print!("  {:<6}", "");
    for r in &report.runs {
        print!("{:>22}", r.scheduler);
    }
    println!();
    for name in ORDER {
        print!("  {name:<6}");
        for r in &report.runs {
            let j = r.jobs.iter().find(|j| j.name == name).expect("job");
            print!(
                "{:>22}",
                format!("{} / {}", j.read_bytes / 1024, j.write_bytes / 1024)
            );
        }
        println!();
    }
    let cfq = report
        .runs
        .iter()
        .find(|r| r.scheduler == "cfq")
        .expect("cfq ran");
    let bytes = |n: &str| cfq.jobs.iter().find(|j| j.name == n).expect("job").bytes as f64;
    let rt: Vec<f64> = ORDER[..8].iter().map(|n| bytes(n)).collect();
    let rest: f64 = ORDER[8..].iter().map(|n| bytes(n)).sum();
    let rt_total: f64 = rt.iter().sum();
    for (level, w) in rt.windows(2).enumerate() {
        assert!(
            w[1] <= w[0] * 1.02,
            "{scenario}: rt{} got more than rt{level}: {rt:?}",
            level + 1
        );
    }
    assert!(
        rt.iter().all(|&b| b > 0.0),
        "{scenario}: an RT level got nothing: {rt:?}"
    );
    assert!(
        rt[0] > 4.0 * rt[7],
        "{scenario}: rt0 {} vs rt7 {}",
        rt[0],
        rt[7]
    );
    assert!(
        rest < 0.05 * rt_total,
        "{scenario}: BE and IDLE got {rest} bytes against RT's {rt_total}"
    );
}

#[test]
fn cfq_serves_rt_first_and_by_level_with_sync_io() {
    check("ioprio-17-sync");
}

#[test]
fn cfq_serves_rt_first_and_by_level_with_async_io() {
    check("ioprio-17-async");
}
