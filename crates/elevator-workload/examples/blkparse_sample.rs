//! Write a synthetic block trace in blkparse's default text format (or
//! MQSim's, or DiskSim's validation format) on standard output: the
//! samples the README's what-if and the replay benchmark use.
//!
//! ```sh
//! cargo run --release -p elevator-workload --example blkparse_sample > sample.blkparse
//! cargo run --release -p elevator-workload --example blkparse_sample -- 1000000 > big.blkparse
//! ```
//!
//! Not a recording of a real machine: this container cannot run blktrace
//! (it needs debugfs and the kernel's tracing), so the sample is made
//! here, seeded and deterministic, with the mix a database server shows:
//! - `mysqld-3100` and `mysqld-3101`: random 16 KiB synchronous reads
//!   (`RS`), about 40 per second each, Poisson arrivals;
//! - `dd-2001`: a sequential 128 KiB reader, one request every 10 ms;
//! - `kworker/u8:2-88`: writeback, bursts of 64 asynchronous 512 KiB writes
//!   every 5 s (`W`);
//! - `jbd2/sda1-8-412`: a synchronous 4 KiB journal write (`WS`) every
//!   200 ms.
//!
//! Each request gets blktrace's queue, get-request, insert, issue and
//! complete events (`Q G I D C`); the issue and completion times are
//! placeholders (the replay reads only `Q`). blkparse's summary closes the
//! file.

use elevator_core::Prng;
use std::io::Write;

/// Sectors of the traced disk (a 1 TB drive).
const DISK_SECTORS: u64 = 1_953_125_000;

struct Source {
    name: &'static str,
    pid: u32,
    rwbs: &'static str,
    sectors: u64,
    /// Mean gap between requests, ns.
    gap_ns: f64,
    poisson: bool,
    sequential: bool,
    /// Requests per burst (1: none).
    burst: u32,
    next_ns: u64,
    sector: u64,
}

fn main() {
    let count: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("the first argument is a request count"))
        .unwrap_or(20_000);
    let mut rng = Prng::derive(1, "blkparse-sample");
    let mut sources = [
        ("mysqld", 3100, "RS", 32, 25_000_000.0, true, false, 1),
        ("mysqld", 3101, "RS", 32, 25_000_000.0, true, false, 1),
        ("dd", 2001, "R", 256, 10_000_000.0, false, true, 1),
        (
            "kworker/u8:2",
            88,
            "W",
            1024,
            5_000_000_000.0,
            false,
            true,
            64,
        ),
        ("jbd2/sda1-8", 412, "WS", 8, 200_000_000.0, false, true, 1),
    ]
    .map(
        |(name, pid, rwbs, sectors, gap_ns, poisson, sequential, burst)| Source {
            name,
            pid,
            rwbs,
            sectors,
            gap_ns,
            poisson,
            sequential,
            burst,
            next_ns: 0,
            sector: 0,
        },
    );
    for (i, s) in sources.iter_mut().enumerate() {
        s.sector = (i as u64 + 1) * DISK_SECTORS / 7;
        s.next_ns = rng.below(1_000_000);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut seq = 0u64;
    let mut written = 0u64;
    while written < count {
        let i = (0..sources.len())
            .min_by_key(|&i| sources[i].next_ns)
            .expect("sources");
        let s = &mut sources[i];
        let t = s.next_ns;
        for _ in 0..s.burst.min((count - written) as u32) {
            let sector = if s.sequential {
                let at = s.sector;
                s.sector = (s.sector + s.sectors) % (DISK_SECTORS - s.sectors);
                at
            } else {
                rng.below(DISK_SECTORS / 32) * 32
            };
            let cpu = i % 4;
            for (k, action) in ["Q", "G", "I", "D", "C"].iter().enumerate() {
                seq += 1;
                let at = t + k as u64 * 1500;
                let (who, pid) = if *action == "C" {
                    ("0".to_string(), 0)
                } else {
                    (s.name.to_string(), s.pid)
                };
                writeln!(
                    out,
                    "{:>3},{:<2} {:>4} {:>8} {:>5}.{:09} {:>5}  {}  {} {} + {} [{}]",
                    8,
                    0,
                    cpu,
                    seq,
                    at / 1_000_000_000,
                    at % 1_000_000_000,
                    pid,
                    action,
                    s.rwbs,
                    sector,
                    s.sectors,
                    who
                )
                .expect("stdout");
            }
            written += 1;
        }
        let gap = if s.poisson {
            // Exponential gaps: a Poisson stream of the mean rate.
            -(1.0 - rng.unit()).ln() * s.gap_ns
        } else {
            s.gap_ns
        };
        s.next_ns = t + gap.max(1.0) as u64;
    }
    writeln!(out, "CPU0 (8,0):\n Reads Queued: {written}\nTotal (8,0):").expect("stdout");
}
