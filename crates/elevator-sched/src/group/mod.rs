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
pub mod latency;
pub mod registry;
pub mod throttle;
pub mod wbt;

use crate::{FreedSlot, Scheduler, SchedulerType};
use elevator_core::{GroupTree, Instant, QueueLimits, Request};
use iocost_params::IocostSpec;
use std::collections::VecDeque;
use std::fmt;

/// A group layer, as [`SchedulerType`] is a policy: its name (the cgroup
/// or queue file it models), what it honours, a line for `elevator list`,
/// the settings that ask for it, and `build`, which wraps a policy in it
/// when the run's settings ask for it. Each layer module declares one as
/// `TYPE`; [`registry::GROUP_LAYERS`] lists them in stacking order.
#[derive(Clone, Copy)]
pub struct GroupLayerType {
    /// `io.max`, `io.latency`, `io.cost`, `wbt`.
    pub name: &'static str,
    /// What it honours, for `elevator list` ("limits", "weights"; "-").
    pub honours: &'static str,
    pub about: &'static str,
    /// The scenario keys that ask for it (`group.io_max`, `wbt.lat_usec`).
    pub keys: &'static [&'static str],
    /// `inner` wrapped in the layer if the run asks for it, else `inner`
    /// unchanged; with what the run's settings line shows of it.
    pub build: fn(Box<dyn Scheduler>, &LayerContext<'_>) -> Layered,
}

impl fmt::Debug for GroupLayerType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupLayerType")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What a layer's `build` knows of the run.
#[derive(Clone, Copy, Debug)]
pub struct LayerContext<'a> {
    /// The policy the layer wraps (wbt is off under some).
    pub policy: &'static SchedulerType,
    /// The control groups: weights, `io.max`, latency targets.
    pub groups: &'a GroupTree,
    /// The device's limits as the policy sees them.
    pub limits: &'a QueueLimits,
    pub settings: &'a LayerSettings,
}

/// The layers' settings beyond the group tree, as a scenario gives them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayerSettings {
    /// `[iocost]`: io.cost's `io.cost.model` and `io.cost.qos`.
    pub iocost: Option<IocostSpec>,
    /// `[wbt]`: blk-wbt's `wbt_lat_usec` and `write_cache`.
    pub wbt: Option<wbt::WbtSpec>,
}

/// A policy, wrapped in a layer or not, and what the run shows of the
/// layer (`wbt` → `2000us`, `off(bfq)`), if anything.
#[derive(Debug)]
pub struct Layered {
    pub scheduler: Box<dyn Scheduler>,
    pub shown: Option<String>,
}

impl Layered {
    /// `scheduler` as it was: the run does not ask for the layer.
    pub fn absent(scheduler: Box<dyn Scheduler>) -> Self {
        Layered {
            scheduler,
            shown: None,
        }
    }
}

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
