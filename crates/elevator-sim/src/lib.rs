//! The discrete-event simulator.
//!
//! A [`Workload`](elevator_core::Workload) submits block requests through
//! [`Io`](elevator_core::Io); the [`Engine`]
//! admits them to the block queue (bounded by `nr_requests` per direction,
//! as the kernel's request lists are), hands them to the policy, feeds the
//! device whenever it has a free slot, and reports completions back to the
//! workload, all in virtual time.
//!
//! Determinism: there is no clock and no randomness here. Events at the
//! same instant are handled in a fixed order: device completions, then
//! timers in the order they were armed, then admission of new requests, then
//! dispatch. Workloads draw their randomness from seeded `Prng`s, so a
//! (scenario, policy, seed) triple always gives the same run.
//!
//! Invariant (checked): every submitted request completes exactly once, and
//! the device never holds more than its queue depth.

mod engine;

pub use engine::{
    congestion_off, congestion_on, Engine, EngineConfig, Plugging, RunSummary, IDE_24_MAX_SECTORS,
    UNPLUG_DELAY, UNPLUG_THRESH,
};
