//! The start-up replay on a simulated device: the real traces parse to the
//! sizes the reference notes give, and a small trace replays with the
//! timing rules of S's replayer (think times honoured, readahead
//! asynchronous, synchronous reads waiting for their process's readahead).

use elevator_core::shared::shared_present;
use elevator_core::Duration;
use elevator_sim::{Engine, EngineConfig};
use elevator_workload::{Part, StartupReplay, StartupTrace};
use std::path::PathBuf;

fn trace_dir() -> PathBuf {
    // crates/elevator-workload → the repository root → its sibling `shared`.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/startup")
}

/// Replay `trace` alone under noop on `device`; the job's statistics.
fn replay(trace: StartupTrace, device: &str) -> elevator_metrics::JobStats {
    let dev = elevator_device::open(device).unwrap();
    let limits = dev.limits();
    let noop = elevator_sched::find("noop").unwrap();
    let sched = (noop.build)(&noop.tunables([]).unwrap(), &limits);
    let mut part = StartupReplay::new("app", trace, 1, 1);
    part.region_start = 1 << 20;
    let mut engine = Engine::new(sched, dev, EngineConfig::default());
    let summary = engine.run(&mut part);
    assert!(!summary.timed_out);
    part.stats().remove(0)
}

#[test]
fn the_real_traces_parse() {
    let dir = trace_dir();
    if !shared_present(&dir) {
        return;
    }
    // (name, requests, processes) as counted in the files.
    for (name, requests, processes) in [
        ("xterm", 718, 2),
        ("gnometerm", 2781, 7),
        ("lowriter", 1268, 4),
    ] {
        let path = dir.join(format!("{name}.trace"));
        let text = std::fs::read_to_string(&path).unwrap();
        let t = StartupTrace::parse(&path.display().to_string(), &text).unwrap();
        println!(
            "{name}: {} requests from {} processes, {:.1} MiB, {:.3} s of think time",
            t.requests.len(),
            t.processes.len(),
            t.total_sectors() as f64 / 2048.0,
            t.total_think().as_secs_f64()
        );
        assert_eq!(t.requests.len(), requests);
        assert_eq!(t.processes.len(), processes);
    }
}

#[test]
fn think_times_readahead_and_dependencies_follow_s() {
    let text = "\
a-1 0     8 100 Rand 0 0 R  0.000 START
a-1 .001  8 200 Rand 0 0 RA 0.001 C
a-1 .001  8 208  Seq 0 8 RA 0.002 C
a-1 .010 16 216  Seq 0 16 R 0.012 C
b-2 .005  8 900 Rand 0 0 RM 0.017 START
";
    let trace = StartupTrace::parse("t", text).unwrap();
    let think = trace.total_think();
    assert_eq!(think, Duration::from_micros(17_000));
    let stats = replay(trace, "ssd-sata-2016");
    let startup = stats.extra["startup_s"];
    println!(
        "start-up {startup:.6} s, think {:.6} s, {} requests",
        think.as_secs_f64(),
        stats.ios
    );
    assert_eq!(stats.ios, 5);
    // The think time plus three synchronous reads of about 0.1 ms each.
    assert!(startup >= think.as_secs_f64());
    assert!(startup < think.as_secs_f64() + 0.002, "{startup}");
}
