//! Group control that composes with every policy.
//!
//! [`throttle`] holds requests of groups over their `io.max` limits before
//! they reach the policy (the kernel's blk-throttle sits above the
//! elevator in the same way), so `--sched deadline` with limits works.
//! [`latency`] (io.latency) holds requests of groups whose siblings miss
//! their latency target, in the same place.
//! [`iocost`] (io.cost) charges each request to its group's virtual time
//! by a cost model and holds groups that ran ahead of the device's, so
//! `io.weight` holds under any policy, in the same place.
//! [`wbt`] (blk-wbt) holds buffered writes over a depth it scales by the
//! latency of reads, in the same place, inside the others (it is the
//! first rq-qos policy a queue gets).
//! Proportional weights otherwise live inside the policies that honour
//! them (CFQ, BFQ), since only a policy decides who goes next.

pub mod iocost;
pub mod iocost_params;
pub mod latency;
pub mod throttle;
pub mod wbt;
