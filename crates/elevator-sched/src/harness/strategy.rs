//! Proptest strategies for cases, and the runner configuration.
//!
//! Two shapes of workload, mixed:
//! - a crowd: up to 16 tasks with short phases of every layout, for
//!   merges, bursts, exits and queue-count bookkeeping;
//! - streams: up to 4 tasks with phases of thousands of requests, so a
//!   greedy reader can keep a writer waiting for many seconds. A policy that
//!   starves one direction breaks its starvation bound on these runs (the
//!   `ReadsFirst` toy in the conformance suite proves it).

use crate::harness::workload::{
    Case, DeviceSpec, Exit, Layout, OpKind, OpMix, Phase, Service, TaskScript, Workload,
};
use elevator_core::{Duration, GroupId, IoPrio, QueueLimits, TaskId};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestRunner};

/// The seed every run starts from unless `PROPTEST_RNG_SEED` says otherwise,
/// so CI runs are reproducible.
pub const DEFAULT_SEED: u64 = 0x5eed_e1e7_a702;

/// A runner with a fixed seed (`PROPTEST_RNG_SEED` overrides it), `cases`
/// cases (`PROPTEST_CASES` overrides them), no failure files and bounded
/// shrinking. Proptest prints the seed and the minimal failing case.
pub fn runner(cases: u32) -> TestRunner {
    TestRunner::new(config(cases))
}

/// A runner that reports the first failure without shrinking it, for tests
/// that only need to know that a failure is found.
pub fn finder(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        max_shrink_iters: 0,
        ..config(cases)
    })
}

fn config(cases: u32) -> Config {
    Config {
        cases: env_u64("PROPTEST_CASES").map_or(cases, |c| c as u32),
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(env_u64("PROPTEST_RNG_SEED").unwrap_or(DEFAULT_SEED)),
        failure_persistence: None,
        max_shrink_iters: 4096,
        max_shrink_time: 60_000,
        ..Config::default()
    }
}

/// The seed the runners use.
pub fn seed() -> u64 {
    env_u64("PROPTEST_RNG_SEED").unwrap_or(DEFAULT_SEED)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A whole case: workload and device.
pub fn case() -> impl Strategy<Value = Case> {
    (workload(), device()).prop_map(|(workload, device)| Case { workload, device })
}

pub fn workload() -> impl Strategy<Value = Workload> {
    prop_oneof![
        3 => prop::collection::vec(task(false), 1..=16),
        2 => prop::collection::vec(task(true), 1..=4),
    ]
    .prop_map(|mut tasks| {
        for (i, t) in tasks.iter_mut().enumerate() {
            t.task = TaskId(i as u32 + 1);
        }
        Workload { tasks }
    })
}

pub fn prio() -> impl Strategy<Value = IoPrio> {
    prop_oneof![
        (0..8u8).prop_map(IoPrio::rt),
        (0..8u8).prop_map(IoPrio::be),
        Just(IoPrio::idle()),
        (-20i8..=19).prop_map(IoPrio::from_nice),
    ]
}

fn micros(range: std::ops::RangeInclusive<u64>) -> impl Strategy<Value = Duration> {
    range.prop_map(Duration::from_micros)
}

fn task(long: bool) -> impl Strategy<Value = TaskScript> {
    (
        prio(),
        (0..4u32).prop_map(GroupId),
        prop_oneof![3 => Just(Duration::ZERO), 1 => micros(0..=2_000_000)],
        prop_oneof![Just(1u32), 1..=8u32],
        prop::collection::vec(phase(long), 1..=4),
        prop_oneof![
            2 => Just(Exit::Never),
            1 => Just(Exit::WhenDone),
            1 => Just(Exit::AfterLastIssue),
        ],
        any::<u64>(),
    )
        .prop_map(
            |(prio, group, start, outstanding, phases, exit, seed)| TaskScript {
                task: TaskId(0),
                prio,
                group,
                start,
                outstanding,
                phases,
                exit,
                seed,
                base: None,
            },
        )
}

fn op_mix() -> impl Strategy<Value = OpMix> {
    prop_oneof![
        3 => Just(OpMix::Only(OpKind::Read)),
        1 => Just(OpMix::Only(OpKind::SyncWrite)),
        2 => Just(OpMix::Only(OpKind::AsyncWrite)),
        2 => Just(OpMix::Any),
    ]
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![
        3 => Just(Layout::Sequential),
        1 => Just(Layout::Descending),
        1 => any::<bool>().prop_map(|descending| Layout::Holes { descending }),
        2 => prop_oneof![Just(64u64), Just(1 << 14), Just(1 << 30)]
            .prop_map(|span| Layout::Random { span }),
        1 => Just(Layout::NearOthers),
        1 => Just(Layout::Repeat),
        2 => Just(Layout::Mixed),
    ]
}

fn phase(long: bool) -> impl Strategy<Value = Phase> {
    let requests = if long { 1..=3000u32 } else { 1..=40u32 };
    (
        requests,
        op_mix(),
        layout(),
        prop_oneof![Just(8u32), 1..=16u32, 1..=256u32, Just(1024u32)],
        prop_oneof![
            3 => Just(Duration::ZERO),
            2 => micros(0..=100),
            1 => micros(0..=5_000),
        ],
        prop::bool::weighted(0.12),
        prop_oneof![
            4 => Just(Duration::ZERO),
            1 => micros(0..=1_000_000),
            1 => micros(1_000_000..=3_000_000),
        ],
        prop::option::weighted(0.2, prio()),
    )
        .prop_map(
            |(requests, ops, layout, max_request, think, burst, pause, prio)| Phase {
                // A burst is a flush of dirty pages, not a whole stream.
                requests: if burst { requests.min(128) } else { requests },
                ops,
                layout,
                max_request,
                min_request: 1,
                min_think: Duration::ZERO,
                max_think: think,
                burst,
                pause,
                prio,
                metadata: true,
            },
        )
}

pub fn device() -> impl Strategy<Value = DeviceSpec> {
    (
        prop_oneof![2 => Just(1u32), 1 => 2..=4u32, 1 => 1..=32u32],
        prop_oneof![
            Just(8u32),
            Just(16),
            Just(64),
            Just(128),
            Just(256),
            Just(512),
            Just(1024)
        ],
        any::<bool>(),
        prop_oneof![
            micros(50..=500),
            micros(500..=5_000),
            micros(5_000..=20_000),
        ],
        1..=8u64,
        any::<u64>(),
    )
        .prop_map(
            |(queue_depth, max_sectors, rotational, max_service, spread, seed)| DeviceSpec {
                limits: QueueLimits {
                    rotational,
                    queue_depth,
                    max_sectors,
                    ..QueueLimits::default()
                },
                service: Service::Uniform {
                    // Between max/8 and max: long enough runs for expiry.
                    min: Duration(max_service.nanos() * spread / 8).max(Duration(1)),
                    max: max_service,
                },
                seed,
            },
        )
}
