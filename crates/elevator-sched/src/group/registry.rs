//! The group layers, in the order they stack around a policy.
//!
//! Adding a layer is one module under [`crate::group`] with its
//! `TYPE: GroupLayerType` and one line here; the stack builder
//! ([`crate::stack`]) wraps every run's policy in each layer the run asks
//! for, `elevator list` prints it, and `tests/group_conformance.rs` runs
//! it around every registered policy.

use super::GroupLayerType;

/// Every group layer, innermost first: wbt is the queue's first rq-qos
/// policy, so io.latency and io.cost run before it; blk-throttle sits
/// above the rq-qos layers, which sit above the elevator.
pub const GROUP_LAYERS: &[&GroupLayerType] = &[
    &super::wbt::TYPE,
    &super::latency::TYPE,
    &super::iocost::TYPE,
    &super::throttle::TYPE,
];
