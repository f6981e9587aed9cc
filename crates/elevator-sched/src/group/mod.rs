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
//! [`iothrottle`] is io-throttle, the 2009 out-of-tree controller that
//! slept the submitting task of a group over its bytes/s or I/Os/s limit
//! (leaky or token bucket); it sits where that check ran, in
//! `submit_bio`, above everything else.
//! [`wbt`] (blk-wbt) holds buffered writes over a depth it scales by the
//! latency of reads, in the same place, inside the others (it is the
//! first rq-qos policy a queue gets).
//! Proportional weights otherwise live inside the policies that honour
//! them (CFQ, BFQ), since only a policy decides who goes next.

/// The `Scheduler` methods a layer passes straight to its inner policy,
/// and the slots of held requests that merged when let out (its `late`).
macro_rules! forward_to_inner {
    () => {
        fn take_freed_slot(&mut self) -> Option<crate::FreedSlot> {
            self.late.take(&mut *self.inner)
        }

        fn task_exited(&mut self, task: elevator_core::TaskId, now: elevator_core::Instant) {
            self.inner.task_exited(task, now);
        }

        fn set_groups(&mut self, groups: &elevator_core::GroupTree) {
            self.inner.set_groups(groups);
        }

        fn may_queue(
            &mut self,
            request: &elevator_core::Request,
            now: elevator_core::Instant,
        ) -> crate::MayQueue {
            self.inner.may_queue(request, now)
        }
    };
}

pub mod iocost;
pub mod iocost_params;
pub mod iothrottle;
pub mod latency;
pub mod throttle;
pub mod wbt;

use crate::{FreedSlot, Scheduler};
use elevator_core::{Instant, Request};
use std::collections::VecDeque;

/// The slots a layer owes the block layer for requests it let out late.
///
/// A layer that holds a request and hands it to its policy outside
/// [`Scheduler::insert`] (in `dispatch`, or at a completion) hides a merge
/// from the engine, which counts slots by the change of `queued()` across
/// `insert`: the request held a slot while the layer held it, and if the
/// policy merges it into a queued request, that slot is free (the kernel
/// frees a request that merges at insertion, `blk_mq_free_request` after
/// `elv_attempt_insert_merge`). Every layer that lets requests out late
/// does so through [`LateInsert::insert`] and answers
/// [`Scheduler::take_freed_slot`] with [`LateInsert::take`].
///
/// Invariant: after each call, the layer's `queued()` plus the slots owed
/// here is what it was before, less the requests dispatched.
#[derive(Debug, Default)]
pub(crate) struct LateInsert {
    freed: VecDeque<FreedSlot>,
}

impl LateInsert {
    /// Hand the held `request` to `inner`; if it merged there, owe its
    /// slot, and one more for each queued request it joined to it (a
    /// request that fills the gap between two coalesces them). Merged
    /// requests share op and sync flag (`MergeRule::compatible`), so every
    /// slot freed is of `request`'s list.
    pub(crate) fn insert(&mut self, inner: &mut dyn Scheduler, request: Request, now: Instant) {
        let slot = FreedSlot {
            op: request.op,
            sync: request.sync,
        };
        let before = inner.queued();
        inner.insert(request, now);
        let after = inner.queued();
        for _ in after..=before {
            self.freed.push_back(slot);
        }
    }

    /// The next slot owed: this layer's first, then those of the layers
    /// and policy inside it.
    pub(crate) fn take(&mut self, inner: &mut dyn Scheduler) -> Option<FreedSlot> {
        self.freed.pop_front().or_else(|| inner.take_freed_slot())
    }
}
