//! Where `elevator validate`'s time goes: replays DiskSim's `ibm18es`
//! validation trace repeated 100 times (a million requests, as the
//! `replay` bench does) and prints, per run, the wall time and the CPU
//! time of the replay's own thread (Linux's `/proc/thread-self/schedstat`),
//! then the CPU time of the reader alone (what the parsing thread does).
//! On a machine shared with other work the wall time follows the load;
//! the replay thread's CPU time is what an idle machine's wall time
//! would be.
//!
//! `cargo run --release -p elevator-scenario --example validate_cpu [RUNS]`

use elevator_scenario::validate::validate_reader;
use elevator_workload::trace::{TraceFormat, TraceReader};
use std::path::Path;

const TRACE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/traces/disksim-validation/ibm18es.trace"
);

/// CPU time of the calling thread so far, in ns.
fn thread_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat")
        .unwrap_or_else(|e| panic!("/proc/thread-self/schedstat (Linux only): {e}"));
    let first = stat.split_whitespace().next().unwrap_or_default();
    first
        .parse()
        .unwrap_or_else(|_| panic!("/proc/thread-self/schedstat: {first:?} is not a count of ns"))
}

fn main() {
    let runs: usize = match std::env::args().nth(1) {
        None => 3,
        Some(n) => n
            .parse()
            .unwrap_or_else(|_| panic!("RUNS: {n:?} is not a count")),
    };
    if !elevator_core::shared::shared_present(Path::new(TRACE)) {
        return;
    }
    let one = std::fs::read_to_string(TRACE).unwrap_or_else(|e| panic!("{TRACE}: {e}"));
    let text = one.repeat(100);
    for _ in 0..runs {
        let cpu = thread_cpu_ns();
        // A measuring tool, not a simulation: it reads the wall clock.
        #[allow(clippy::disallowed_methods)]
        let wall = std::time::Instant::now();
        let reader = TraceReader::new(
            "ibm18es x100",
            text.as_bytes(),
            TraceFormat::DisksimValidate,
        );
        let v = validate_reader(reader, "ibm18es").expect("a valid trace");
        let (wall, cpu) = (
            wall.elapsed().as_secs_f64(),
            (thread_cpu_ns() - cpu) as f64 / 1e9,
        );
        println!(
            "{} requests: {:.1} ms wall ({:.2} M/s), replay thread {:.1} ms CPU ({:.2} M/s), \
             demerit {:.3} ms",
            v.requests,
            wall * 1e3,
            v.requests as f64 / wall / 1e6,
            cpu * 1e3,
            v.requests as f64 / cpu / 1e6,
            v.demerit_ms
        );
    }
    let cpu = thread_cpu_ns();
    let reader = TraceReader::new(
        "ibm18es x100",
        text.as_bytes(),
        TraceFormat::DisksimValidate,
    );
    let records = reader.filter(Result::is_ok).count();
    let cpu = (thread_cpu_ns() - cpu) as f64 / 1e9;
    println!(
        "reader alone: {records} records in {:.1} ms CPU ({:.1} M/s)",
        cpu * 1e3,
        records as f64 / cpu / 1e6
    );
}
