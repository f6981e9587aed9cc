//! I/O scheduling policies behind one trait.
//!
//! The [`Scheduler`] trait is modelled on the kernel's elevator operations
//! (`elevator_mq_ops`): a request is inserted, the engine asks for the next
//! request to dispatch, and tells the policy when a request completes. The
//! one addition is [`Dispatch::Wait`]: a policy that wants the disk to stay
//! idle for a while (anticipation, CFQ/BFQ idling, throttling) says until
//! when, and the engine arms a wake-up instead of polling.
//!
//! Architecture invariant: policies are pure state machines. They receive
//! `now` as an argument and never read a clock, draw a random number, spawn
//! a thread or touch a file, so the same calls in the same order give the
//! same answers whether the simulator or the io_uring runtime drives them.
//!
//! Adding a policy is one module under [`policy`] and one line in
//! [`registry`]; the conformance suite and the benchmarks pick it up from
//! there.

pub mod check;
pub mod cost;
pub mod group;
#[cfg(any(test, feature = "harness"))]
pub mod harness;
pub mod policy;
mod queue;
mod registry;
pub mod stats;

pub use check::{CheckOptions, CheckReport, Checked, OnViolation, Violation};
pub use queue::{
    BackSeek, FifoQueue, MergeOutcome, MergeRule, Place, PlacedMerge, PlacedQueue, SortedQueue,
};
pub use registry::{find, registry, SchedulerType, Tunable, TunableError, Tunables};

use elevator_core::{Duration, GroupTree, Instant, Op, Request, TaskId};

/// What a policy answers when asked for work.
#[derive(Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Send this request to the device now.
    Request(Request),
    /// Requests are queued (or expected) but the policy wants the device to
    /// stay idle until `until`; ask again then, or earlier if something is
    /// inserted or completes.
    Wait { until: Instant },
    /// Nothing to dispatch and nothing to wait for.
    Empty,
}

/// A policy's answer to "may this task allocate a request?" (the kernel's
/// `elv_may_queue`, 2.6.x): `Must` lets it past a full request list (up to
/// the hard cap), as CFQ answers for the queue it is idling on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MayQueue {
    May,
    Must,
}

/// A block-layer slot freed by a merge the engine did not see: a layer
/// (io.max, io.latency, io.cost, writeback throttling) handed a held
/// request to its policy in `dispatch` or `complete`, and the policy merged
/// it into a queued one. The kernel frees
/// such a request at once (`blk_mq_free_request` after
/// `elv_attempt_insert_merge`); the engine frees a slot of the list `op`
/// and `sync` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreedSlot {
    pub op: Op,
    pub sync: bool,
}

/// An I/O scheduling policy.
pub trait Scheduler: Send + std::fmt::Debug {
    /// The registry name of this policy.
    fn name(&self) -> &'static str;

    /// Queue a request (`request.arrival` is `now`). The policy may merge it
    /// into a queued request instead of queueing it on its own; the survivor
    /// then lists its id in `merged`.
    fn insert(&mut self, request: Request, now: Instant);

    /// The next request for the device, a wait, or nothing.
    fn dispatch(&mut self, now: Instant) -> Dispatch;

    /// The device finished `request` (as dispatched, with its merged ids).
    fn complete(&mut self, request: &Request, now: Instant);

    /// Number of requests queued (merged requests count once).
    fn queued(&self) -> usize;

    /// Whether [`Scheduler::insert`] would merge `request` into a queued
    /// request, so that it needs no request slot of its own. The engine
    /// lets such a request in while the slots are all taken, as a kernel
    /// tries merging before it allocates a request (2.4's `__make_request`
    /// calls the elevator's merge function before `get_request`). Default:
    /// never, so every insert is taken to need a slot.
    fn would_merge(&self, _request: &Request) -> bool {
        false
    }

    /// A slot freed by a merge outside [`Scheduler::insert`], if any (see
    /// [`FreedSlot`]); the engine asks after every `dispatch` and
    /// `complete` until `None`, and the checker ([`check::Checked`])
    /// fails a slot left owed at the next call.
    /// The engine counts slots by the change of [`Scheduler::queued`]
    /// across `insert`, so a request that merges later would keep its slot
    /// forever. Default: none, as a policy merges only in `insert`.
    fn take_freed_slot(&mut self) -> Option<FreedSlot> {
        None
    }

    /// Whether any request is queued.
    fn has_work(&self) -> bool {
        self.queued() > 0
    }

    /// Asked by a block layer with the 2.6.32 request allocation before
    /// `request` takes a slot (`elv_may_queue`). Default: `May`, as
    /// deadline and noop, which have no hook.
    fn may_queue(&mut self, _request: &Request, _now: Instant) -> MayQueue {
        MayQueue::May
    }

    /// The task exited: it will issue no more I/O (AS stops anticipating it).
    fn task_exited(&mut self, _task: TaskId, _now: Instant) {}

    /// The control groups of the run, before any request arrives. Policies
    /// that honour weights (CFQ, BFQ) build their group hierarchy from it;
    /// the others ignore it, as the kernel's deadline and noop do.
    fn set_groups(&mut self, _groups: &GroupTree) {}

    /// The longest a request may wait between insertion and dispatch, when
    /// each dispatched request keeps the device busy for at most `service`
    /// and at most `max_queued` requests are ever queued. `None` means the
    /// policy promises no bound (noop under an unbounded flood does, but
    /// an idle-class queue may not). The conformance suite checks it.
    fn starvation_bound(&self, _service: Duration, _max_queued: usize) -> Option<Duration> {
        None
    }

    /// Why the last [`Scheduler::dispatch`] answered as it did, in the
    /// kernel's words ("batch continue", "expired fifo", "anticipation
    /// hit"), for the engine's decision trace. A policy keeps the reason in
    /// a field it sets anyway, so the trace costs nothing when it is off.
    /// Default: no reason given.
    fn dispatch_reason(&self) -> Option<&'static str> {
        None
    }

    /// Check the policy's own structure (the invariants its module docs
    /// state: BFQ's trees, CFQ's service trees, AS's state) and say what is
    /// broken. The checker ([`check::Checked`]) calls it after every call
    /// when checking is on, so it may cost O(queue) but must not change
    /// anything. Default: nothing to check.
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }
}
