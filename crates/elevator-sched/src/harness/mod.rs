//! The shared test harness: one tester for every policy.
//!
//! A [`Case`] is data: a [`Workload`] of scripted tasks and a [`DeviceSpec`]
//! for a fake device. [`run`] drives any `Scheduler` through a case in
//! virtual time inside the invariant checker ([`crate::check`]), the one the
//! simulator runs every policy through, so a policy is held to the same
//! promises in the conformance suite, the trace tests, the unit tests and
//! the simulator.
//!
//! `strategy` generates cases with proptest; `toys` holds deliberately
//! broken policies that prove each check can fail. A later policy, or a
//! layer that wraps one (throttling), reuses all of it: implement
//! `Scheduler`, call [`run`].
//!
//! Unit tests that measure a policy (shares by weight, latency of an
//! interactive task, when a batch expires) write their case by hand:
//! [`TaskScript::new`] and [`Phase::reads`] give readers with fixed sizes,
//! think times and pauses at a chosen place; [`Service::Serial`] is a disk
//! (seek and transfer costs, one request at a time) or a device with a
//! fixed service time. [`Run`] holds the run open so that a test can stop
//! at a time, look inside the policy (its concrete type is kept), and go
//! on; [`Run::stats`] gives each task's completed requests with their
//! issue, dispatch and completion times.
//!
//! What does not come here: the trace tests (`tests/traces.rs`), whose
//! calls are the test, and tests that check one exact sequence of calls by
//! hand; `benches/policies.rs`, which times a policy's own work per request
//! (the checker and the clients would be most of what it timed).
//!
//! Compiled for this crate's own tests and, with the `harness` feature,
//! for other crates' tests and benches.

pub mod driver;
#[cfg(any(test, feature = "harness"))]
pub mod strategy;
pub mod toys;
pub mod workload;

pub use driver::{run, Options, Run, RunReport, Served, TaskStats};
pub use workload::{
    Case, DeviceSpec, Layout, OpKind, OpMix, Phase, Service, TaskScript, Workload, REGION,
};
