//! Group control that composes with every policy.
//!
//! [`throttle`] holds requests of groups over their `io.max` limits before
//! they reach the policy (the kernel's blk-throttle sits above the
//! elevator in the same way), so `--sched deadline` with limits works.
//! [`latency`] (io.latency) holds requests of groups whose siblings miss
//! their latency target, in the same place.
//! Proportional weights live inside the policies that honour them (CFQ,
//! BFQ), since only a policy decides who goes next.

pub mod latency;
pub mod throttle;
