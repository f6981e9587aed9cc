//! The shared test harness: one tester for every policy.
//!
//! A [`Case`] is data: a [`Workload`] of scripted tasks and a [`DeviceSpec`]
//! for a fake device. [`run`] drives any `Scheduler` through a case in
//! virtual time and checks it from outside while it runs, the way the
//! simulator's invariant checker will:
//!
//! - every inserted id is dispatched exactly once (as a request's `id` or in
//!   its `merged` list), never before it was inserted, and no id is invented;
//! - a merged request covers exactly its parts and respects `max_sectors`;
//! - `queued()` stays within what was inserted and not yet dispatched;
//! - `Dispatch::Wait` always points into the future, and a policy that idles
//!   an idle device with requests queued for too long fails the liveness
//!   check;
//! - at the end nothing is queued, and each request waited no longer than
//!   the policy's own `starvation_bound`.
//!
//! `strategy` generates cases with proptest; `toys` holds deliberately broken
//! policies that prove the checks can fail. A later policy, or a layer that
//! wraps one (throttling), reuses all of it: implement `Scheduler`, call
//! [`run`].

// Each test binary includes this module and uses a different part of it.
#![allow(dead_code)]

pub mod driver;
pub mod strategy;
pub mod toys;
pub mod workload;

// The short paths for the usual entry points; not every binary uses each.
#[allow(unused_imports)]
pub use driver::{run, Options, RunReport, Violation};
#[allow(unused_imports)]
pub use workload::{Case, DeviceSpec, Workload};
