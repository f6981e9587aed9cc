//! The I/O port: the interface between an engine and whatever generates I/O.
//!
//! It belongs to no engine. The discrete-event simulator (`elevator-sim`)
//! and the io_uring runtime (`elevator-uring`) both drive a [`Workload`]
//! through an [`Io`], so direct jobs, trace replays and the simulated host
//! run on either. Invariant: the port names no clock and no file; `now` is
//! whatever the engine says it is.

use crate::{Duration, GroupId, Instant, IoError, IoPrio, Op, Request, RequestId, Sector, TaskId};

/// A block request as a workload describes it (the engine assigns the id
/// and arrival time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockIo {
    pub op: Op,
    pub sync: bool,
    pub sector: Sector,
    pub sectors: u32,
    pub task: TaskId,
    pub prio: IoPrio,
    pub group: GroupId,
    /// Filesystem metadata (`REQ_META | REQ_PRIO`).
    pub meta: bool,
    /// `REQ_NOIDLE`: fsync and journal writes, not O_DIRECT ones
    /// ([`Request::noidle`]).
    pub noidle: bool,
}

/// A finished request, as the workload that submitted it sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub id: RequestId,
    pub op: Op,
    pub sector: Sector,
    pub sectors: u32,
    pub task: TaskId,
    /// When the workload submitted it.
    pub submitted: Instant,
    /// When the policy handed it to the device.
    pub dispatched: Instant,
    /// Now.
    pub completed: Instant,
    /// `None` if the request succeeded, else how it failed (every part of
    /// a failed merged request fails, as the kernel ends all its bios with
    /// the request's error).
    pub error: Option<IoError>,
    /// This request's share of device time: from the later of its dispatch
    /// and the previous completion until now, split among merged parts by
    /// size (exact on a one-at-a-time disk, an apportioning with queueing).
    pub disk_time: Duration,
}

/// What a workload may do when the engine calls it: read the time, submit
/// requests, arm timers, report exiting tasks.
#[derive(Debug)]
pub struct Io<'a> {
    now: Instant,
    next_id: &'a mut u64,
    submitted: &'a mut Vec<Request>,
    timers: &'a mut Vec<(Instant, u64)>,
    exited: &'a mut Vec<TaskId>,
    /// Or-ed into every timer token armed (see [`Io::tag_timers`]).
    tag: u64,
    /// The engine's write-congestion state, when it models one.
    congestion: Option<Congestion>,
    /// The workload asked to unplug the queue (see [`Io::unplug`]).
    unplug: bool,
}

/// The block queue's async-list congestion as the engine last saw it (the
/// backing device's `BDI_async_congested` bit, v2.6.32
/// include/linux/backing-dev.h `bdi_write_congested`), kept current
/// through the call: each async write submitted takes a request of the
/// async list as `get_request` would and sets the bit once the count
/// reaches `on` (v2.6.32 block/blk-core.c). A submitted request that the
/// policy then merges took no request; the engine's own count, which it
/// passes to the next call, knows that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Congestion {
    /// Async requests allocated (queued in the policy or in the driver).
    pub allocated: usize,
    /// `queue_congestion_on_threshold`.
    pub on: usize,
    /// The bit.
    pub congested: bool,
}

impl<'a> Io<'a> {
    /// The engine's side: a call into a workload at `now` appends the
    /// requests it submits, the timers it arms (at, token) and the tasks
    /// that exit to the engine's vectors; ids count up from `next_id`.
    pub fn new(
        now: Instant,
        next_id: &'a mut u64,
        submitted: &'a mut Vec<Request>,
        timers: &'a mut Vec<(Instant, u64)>,
        exited: &'a mut Vec<TaskId>,
    ) -> Self {
        Io {
            now,
            next_id,
            submitted,
            timers,
            exited,
            tag: 0,
            congestion: None,
            unplug: false,
        }
    }

    /// The engine's side: this call sees the queue's async congestion
    /// (an engine that models none leaves the workload its own estimate).
    pub fn with_congestion(mut self, congestion: Congestion) -> Self {
        self.congestion = Some(congestion);
        self
    }

    /// Whether writeback should back off this queue (`bdi_write_congested`,
    /// the async list's bit from 2.6.30), or `None` if the engine does not
    /// model congestion.
    pub fn write_congested(&self) -> Option<bool> {
        self.congestion.map(|c| c.congested)
    }

    /// The submitting task is about to wait for what it submitted: run the
    /// queue now rather than when the plug's threshold or timer would
    /// (2.6.32's `REQ_UNPLUG` on a bio, or the waiter's `sync_page` →
    /// `blk_run_backing_dev`, or O_DIRECT's `blk_run_address_space`).
    /// Engines that do not plug ignore it.
    pub fn unplug(&mut self) {
        self.unplug = true;
    }

    /// The engine's side: whether [`Io::unplug`] was called.
    pub fn unplug_requested(&self) -> bool {
        self.unplug
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    /// Submit a request now; its completion comes back with this id.
    pub fn submit(&mut self, io: BlockIo) -> RequestId {
        let id = RequestId(*self.next_id);
        *self.next_id += 1;
        self.submitted.push(Request {
            id,
            op: io.op,
            sync: io.sync,
            sector: io.sector,
            sectors: io.sectors,
            task: io.task,
            prio: io.prio,
            group: io.group,
            arrival: self.now,
            merged: Vec::new(),
            meta: io.meta,
            noidle: io.noidle,
        });
        if let Some(c) = &mut self.congestion {
            if io.op == Op::Write && !io.sync {
                c.allocated += 1;
                if c.allocated >= c.on {
                    c.congested = true;
                }
            }
        }
        id
    }

    /// Call [`Workload::wake`] with `token` at `at` (now, if `at` has passed).
    pub fn wake_at(&mut self, at: Instant, token: u64) {
        self.timers.push((at.max(self.now), token | self.tag));
    }

    /// Run `f` with `tag` or-ed into the tokens of the timers it arms, so a
    /// workload made of parts can route each wake-up to its part.
    pub fn tag_timers<R>(&mut self, tag: u64, f: impl FnOnce(&mut Io<'_>) -> R) -> R {
        let outer = self.tag;
        self.tag = outer | tag;
        let r = f(self);
        self.tag = outer;
        r
    }

    /// `task` will issue no more I/O.
    pub fn task_exited(&mut self, task: TaskId) {
        self.exited.push(task);
    }
}

/// A source of block I/O driven by the engine.
pub trait Workload {
    /// Called once at time zero.
    fn start(&mut self, io: &mut Io<'_>);
    /// A timer armed with `token` fired.
    fn wake(&mut self, token: u64, io: &mut Io<'_>);
    /// A request this workload submitted completed (once per submitted id,
    /// also for requests the policy merged into others).
    fn completed(&mut self, done: &Completion, io: &mut Io<'_>);
    /// Every part of one finished request has been passed to
    /// [`Workload::completed`]. A workload that models processes woken by
    /// a completion interrupt may hold them back until this call: the
    /// interrupt ends all of a request's buffers before anyone it woke
    /// runs.
    fn request_done(&mut self, io: &mut Io<'_>) {
        let _ = io;
    }
    /// The run ends once this is true (the measured jobs are done).
    fn finished(&self) -> bool;
}
