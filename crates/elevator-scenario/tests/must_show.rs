//! Issue 2's evidence on the simulated devices: deadline's read guarantee
//! under a write flood, determinism, and the built-in scenarios.

use elevator_scenario::{run, RunOptions, Scenario};

fn quiet() -> impl FnMut(&elevator_metrics::RunReport) {
    |_| {}
}

/// A dependent reader (64 KiB at a time) against a streaming writer that
/// keeps 1024 async 128 KiB writes queued (a deep queue, as 2.4's ~30 MB).
const FLOOD: &str = r#"
name = "flood"
description = "dependent reader vs write flood"
device = "ide-2003"

[result]
name = "max read latency"
unit = "ms"
metric = "lat_max_ms"
job = "reader"

[block]
nr_requests = 1024

[[job]]
name = "writer"
rw = "write"
bs = "128k"
region = "4g"
offset = "20g"
iodepth = 1024
sync = false
background = true

[[job]]
name = "reader"
rw = "read"
bs = "64k"
size = "8m"
start = "2s"
"#;

#[test]
fn deadline_bounds_read_latency_under_a_write_flood_and_noop_does_not() {
    let scenario = Scenario::parse("flood", FLOOD).unwrap();
    let report = run(&scenario, &RunOptions::default(), &mut quiet()).unwrap();
    let max_ms = |policy: &str| {
        report
            .runs
            .iter()
            .find(|r| r.scheduler == policy)
            .unwrap()
            .result
            .value
    };
    let (noop, deadline) = (max_ms("noop"), max_ms("deadline"));
    // read_expire (500 ms) plus one batch: fifo_batch (16) writes of
    // 128 KiB, each at most a full-stroke seek, a rotation and the transfer
    // (about 15 + 8.4 + 6 ms on ide-2003): 16 x 30 ms = 480 ms.
    let bound = 500.0 + 16.0 * 30.0;
    println!("max read latency under a write flood: noop {noop:.1} ms, deadline {deadline:.1} ms (bound {bound} ms)");
    assert!(deadline <= bound, "deadline {deadline} ms > {bound} ms");
    assert!(
        noop > 3.0 * deadline,
        "noop {noop} ms is not much worse than deadline {deadline} ms"
    );
}

#[test]
fn same_seed_same_bytes() {
    let text = FLOOD.replace("rw = \"read\"", "rw = \"randread\"\nregion = \"10g\"");
    let scenario = Scenario::parse("flood", &text).unwrap();
    let once = run(&scenario, &RunOptions::default(), &mut quiet())
        .unwrap()
        .to_json();
    let twice = run(&scenario, &RunOptions::default(), &mut quiet())
        .unwrap()
        .to_json();
    assert_eq!(once, twice);
    let other = RunOptions {
        seed: Some(2),
        ..RunOptions::default()
    };
    let reseeded = run(&scenario, &other, &mut quiet()).unwrap().to_json();
    assert_ne!(once, reseeded, "the seed must matter to a random reader");
}

#[test]
fn every_builtin_scenario_parses() {
    for (name, description) in elevator_scenario::builtins() {
        let s = elevator_scenario::builtin(name).unwrap();
        assert!(s.is_ok(), "{name}: {description}");
    }
}
