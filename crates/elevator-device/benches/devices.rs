//! The cost of one request through each built-in device model, in steady
//! state: submit, jump to the next completion, complete, resubmit.
//!
//! Three loads per profile: one 4 KiB random reader (depth 1), a full queue
//! of 4 KiB random readers (the profile's depth, at most 32), and one
//! sequential 128 KiB reader. Random offsets come from a fixed table so the
//! generator costs nothing measurable. The simulator's budget is about
//! 500 ns per request for everything (2 million requests per second).
//!
//! `cargo bench -p elevator-device --bench devices`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use elevator_core::{Instant, Op, Prng, Request};
use elevator_device::{builtin_profiles, open, Device};
use std::hint::black_box;

/// Pre-drawn random 4 KiB-aligned offsets, as fractions of the capacity.
const OFFSETS: usize = 4096;

struct Loop {
    dev: Box<dyn Device>,
    now: Instant,
    request: Request,
    offsets: Vec<u64>,
    next: usize,
    sequential: bool,
}

impl Loop {
    fn new(profile: &str, depth: u32, sequential: bool) -> Self {
        let dev = open(profile).expect("built-in profile");
        let cap = dev.limits().capacity;
        let mut rng = Prng::new(1);
        let offsets = (0..OFFSETS).map(|_| rng.below(cap / 8 - 256) * 8).collect();
        let sectors = if sequential { 256 } else { 8 };
        let mut l = Loop {
            dev,
            now: Instant::ZERO,
            request: Request::read(0, 0, 0, sectors),
            offsets,
            next: 0,
            sequential,
        };
        for _ in 0..depth {
            l.submit();
        }
        l
    }

    fn submit(&mut self) {
        self.request.id.0 += 1;
        self.request.sector = if self.sequential {
            self.request.sector + u64::from(self.request.sectors)
        } else {
            self.next = (self.next + 1) % OFFSETS;
            self.offsets[self.next]
        };
        self.request.op = if self.request.id.0 % 4 == 0 && !self.sequential {
            Op::Write
        } else {
            Op::Read
        };
        self.dev.submit(&self.request, self.now);
    }

    /// One completion and one new submission.
    fn step(&mut self) {
        let due = self.dev.next_completion().expect("in flight");
        self.now = due;
        while let Some(id) = self.dev.complete(self.now) {
            black_box(id);
            self.submit();
        }
    }
}

fn devices(c: &mut Criterion) {
    let mut group = c.benchmark_group("device_request");
    group.throughput(Throughput::Elements(1));
    for (name, _) in builtin_profiles() {
        let depth = open(name).unwrap().limits().queue_depth.min(32);
        for (label, d, seq) in [
            ("rand-qd1", 1, false),
            ("rand-full", depth, false),
            ("seq-128k", 1, true),
        ] {
            if label == "rand-full" && depth == 1 {
                continue;
            }
            let mut l = Loop::new(name, d, seq);
            group.bench_function(BenchmarkId::new(name, label), |b| b.iter(|| l.step()));
        }
    }
    group.finish();
}

criterion_group!(benches, devices);
criterion_main!(benches);
