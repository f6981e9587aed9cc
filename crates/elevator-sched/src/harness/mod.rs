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
