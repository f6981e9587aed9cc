//! How fast traces replay: requests per wall-clock second.
//!
//! - `validate/ibm18es-1M`: DiskSim's `ibm18es` validation trace repeated
//!   100 times (1,000,000 requests), parsed and replayed one at a time on
//!   the `ibm18es` model and scored, as `elevator validate` does (the
//!   trace parsed a batch ahead on a second thread). DiskSim 4.0 (-O2)
//!   runs the same kind of replay at about 13,000 requests per second on
//!   this machine class (../shared/reference/devices-workloads-traces.md
//!   §6 and the measurement); the goal is 400 times that, 5.2
//!   million per second, 192 ms for the million.
//! - `parse/ibm18es-1M`: the same million lines through the reader alone
//!   (what `validate`'s parsing thread does, a batch ahead of the replay).
//! - `replay/nvme-1M-open`: a one-million-request MQSim-format trace (4 KiB
//!   random reads from 4 devices, 100,000 per second) parsed and replayed
//!   open loop through the engine under noop on `nvme`.
//!
//! Reads `../shared/traces/disksim-validation/ibm18es.trace`; panics with
//! the path if it is missing (a benchmark without its input measures
//! nothing).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use elevator_core::Prng;
use elevator_core::Workload;
use elevator_scenario::validate::validate_reader;
use elevator_sched::stack::{Origin, StackBuilder};
use elevator_sim::{Engine, EngineConfig};
use elevator_workload::trace::{ReplayMode, TraceFormat, TraceReader, TraceReplay};
use std::fmt::Write;

const REQUESTS: u64 = 1_000_000;

fn ibm18es_million() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces/disksim-validation/ibm18es.trace"
    );
    let one = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("the replay bench reads {path}: {e}"));
    let lines = one.lines().filter(|l| !l.trim().is_empty()).count() as u64;
    assert_eq!(REQUESTS % lines, 0, "{path} has {lines} requests");
    one.repeat((REQUESTS / lines) as usize)
}

fn mqsim_million() -> String {
    let mut rng = Prng::derive(1, "replay-bench");
    let mut text = String::with_capacity(32 * REQUESTS as usize);
    for i in 0..REQUESTS {
        let sector = rng.below(100_000_000) * 8;
        let _ = writeln!(text, "{} {} {sector} 8 1", i * 10_000, i % 4);
    }
    text
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("trace");
    group.sample_size(10);
    group.throughput(Throughput::Elements(REQUESTS));

    let disksim = ibm18es_million();
    group.bench_function("validate/ibm18es-1M", |b| {
        b.iter(|| {
            let reader = TraceReader::new(
                "ibm18es x100",
                disksim.as_bytes(),
                TraceFormat::DisksimValidate,
            );
            let v = validate_reader(reader, "ibm18es").expect("valid trace");
            assert_eq!(v.requests as u64, REQUESTS);
        })
    });

    // The reader alone, as the parsing thread of `validate` runs it.
    group.bench_function("parse/ibm18es-1M", |b| {
        b.iter(|| {
            let reader = TraceReader::new(
                "ibm18es x100",
                disksim.as_bytes(),
                TraceFormat::DisksimValidate,
            );
            let mut n = 0u64;
            for record in reader {
                record.expect("valid trace");
                n += 1;
            }
            assert_eq!(n, REQUESTS);
        })
    });

    let mqsim = mqsim_million();
    group.bench_function("replay/nvme-1M-open", |b| {
        b.iter(|| {
            let dev = elevator_device::open("nvme").expect("built-in");
            let limits = dev.limits();
            let noop = StackBuilder::new("noop", Origin::command_line()).expect("registered");
            let (mut engine, _) = Engine::build(noop, dev, EngineConfig::linux_26());
            let reader = TraceReader::new("mqsim 1M", mqsim.as_bytes(), TraceFormat::Mqsim);
            let mode = ReplayMode::Open { time_scale: 1.0 };
            let mut replay = TraceReplay::new(reader, mode, limits.capacity, limits.max_sectors, 1);
            engine.run(&mut replay);
            assert!(replay.finished());
            assert_eq!(replay.total().ios, REQUESTS);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
