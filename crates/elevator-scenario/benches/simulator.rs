//! How fast the simulator runs: simulated requests per wall-clock second.
//!
//! Eight random 4 KiB readers at depth 4 on the NVMe model, and ten
//! sequential 128 KiB readers on the 2003 IDE disk, each under noop and
//! deadline. Criterion reports the throughput in requests (elements) per
//! second; the target is at least 2 million.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use elevator_scenario::{run_one, Scenario};

const RANDOM_NVME: &str = r#"
name = "bench-random"
description = "eight random readers on nvme"
device = "nvme"
[result]
name = "requests"
unit = "ios"
metric = "iops"
[[job]]
name = "r"
count = 8
rw = "randread"
bs = "4k"
size = "80m"
region = "1g"
iodepth = 4
"#;

const SEQUENTIAL_IDE: &str = r#"
name = "bench-sequential"
description = "ten sequential readers on ide-2003"
device = "ide-2003"
[result]
name = "requests"
unit = "ios"
metric = "iops"
[[job]]
name = "r"
count = 10
rw = "read"
bs = "128k"
size = "100m"
"#;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulator");
    group.sample_size(10);
    for (label, text) in [
        ("random-nvme", RANDOM_NVME),
        ("sequential-ide", SEQUENTIAL_IDE),
    ] {
        let scenario = Scenario::parse(label, text).expect("valid");
        for policy in ["noop", "deadline"] {
            let ios: u64 = run_one(&scenario, policy, &scenario.device, 1, &[])
                .expect("runs")
                .jobs
                .iter()
                .map(|j| j.ios)
                .sum();
            group.throughput(Throughput::Elements(ios));
            group.bench_function(format!("{label}/{policy}"), |b| {
                b.iter(|| run_one(&scenario, policy, &scenario.device, 1, &[]).expect("runs"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
