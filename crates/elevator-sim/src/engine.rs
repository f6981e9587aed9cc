//! The event loop.

use elevator_core::{Completion, Congestion, Io, Workload};
use elevator_core::{Duration, Instant, IoError, Op, Request, RequestId, Sector, TaskId};
use elevator_device::{Device, DeviceStats};
use elevator_sched::{CheckOptions, CheckReport, Checked, Dispatch, OnViolation, Scheduler};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

/// The first lines of a decision trace.
const TRACE_HEADER: &str = "\
# time s           act rwbs  sector + sectors [task] why
# I queued, M merged into a queued request, D dispatched, W policy waits, C completed
";

/// Requests per direction the block queue may hold (queued in the policy
/// or in flight on the device) before submitters wait for a free slot: the
/// kernel's `nr_requests`, BLKDEV_MAX_RQ = 128 in 2.6 (include/linux/blkdev.h).
pub const NR_REQUESTS: usize = 128;

/// Largest request of 2.4's IDE driver, sectors (64 KiB): `max_sectors`
/// per device, drivers/ide/ide-probe.c `init_gendisk`, 2.4.18–2.4.21.
pub const IDE_24_MAX_SECTORS: u32 = 128;

/// Requests a task that waited for a slot may then take past a full list
/// (`BLK_BATCH_REQ`, v2.6.32 block/blk.h).
pub const BLK_BATCH_REQ: u32 = 32;

/// ... or for this long after it waited (`BLK_BATCH_TIME`, HZ/50, v2.6.32
/// block/blk.h).
pub const BLK_BATCH_TIME: Duration = Duration::from_millis(20);

/// Requests queued and not yet in the driver at which a plugged queue
/// unplugs (`q->unplug_thresh = 4`, v2.6.32 block/blk-settings.c
/// `blk_queue_make_request`; checked in block/elevator.c `elv_insert`).
pub const UNPLUG_THRESH: usize = 4;

/// How long a queue stays plugged at most (`q->unplug_delay =
/// msecs_to_jiffies(3)`, at least one jiffy, v2.6.32
/// block/blk-settings.c; the timer is armed by block/blk-core.c
/// `blk_plug_device`). 3 ms at HZ=1000.
pub const UNPLUG_DELAY: Duration = Duration::from_millis(3);

/// Pre-2.6.39 plugging: a queue that was empty when a request arrived
/// holds its requests back from the driver for a moment, to let more
/// arrive and merge (v2.6.32 block/blk-core.c `blk_plug_device`,
/// `generic_unplug_device`, `__make_request`; block/elevator.c
/// `elv_insert`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plugging {
    /// `unplug_thresh`.
    pub unplug_thresh: usize,
    /// `unplug_delay`.
    pub unplug_delay: Duration,
}

impl Plugging {
    /// 2.6.32's defaults.
    pub const LINUX_2632: Plugging = Plugging {
        unplug_thresh: UNPLUG_THRESH,
        unplug_delay: UNPLUG_DELAY,
    };
}

/// `queue_congestion_on_threshold`: nr − nr/8 + 1, at most nr (113 of
/// 128; v2.6.32 block/blk-core.c `blk_queue_congestion_threshold`).
pub fn congestion_on(nr: usize) -> usize {
    (nr - nr / 8 + 1).min(nr)
}

/// `queue_congestion_off_threshold`: nr − nr/8 − nr/16 − 1, at least 1
/// (103 of 128; same function).
pub fn congestion_off(nr: usize) -> usize {
    (nr - nr / 8).saturating_sub(nr / 16 + 1).max(1)
}

/// Engine settings that are not the policy's or the device's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Request slots per direction (read, write); `usize::MAX` for none.
    pub nr_requests: [usize; 2],
    /// Sleeping submitters are woken only once this many slots of their
    /// direction are free (2.4's `batch_requests`); 1 wakes one per slot.
    pub batch_requests: usize,
    /// A new submitter may take a free slot while others sleep for one
    /// (2.4's `get_request` before `__get_request_wait`); otherwise it
    /// queues behind them.
    pub steal: bool,
    /// Andrea Arcangeli's elevator-lowlatency: no new request while the
    /// sectors queued and in flight exceed this; sleepers wake once they
    /// fall to three quarters of it. Merges still go through the policy.
    pub inflight_limit: Option<u64>,
    /// The block layer's largest request (sectors) where it is below the
    /// device's own limit; `None`: the device's. Whoever builds the policy
    /// and the host for this engine applies it to their `QueueLimits`
    /// (the engine itself never splits or merges).
    pub max_sectors: Option<u32>,
    /// When a request completes, the driver starts the next one before the
    /// completion reaches the workload (and before sleepers waiting for a
    /// request slot are woken): the processes a completion wakes run only
    /// after the interrupt that woke them, by which time the disk is busy
    /// with the next request. Off: the workload hears of the completion
    /// first and may submit before the next dispatch.
    pub restart_before_wakeup: bool,
    /// 2.6.30+ request allocation (v2.6.32 block/blk-core.c `get_request`):
    /// the two lists count sync and async requests (commit 1faa16d) instead
    /// of reads and writes; the policy is asked `may_queue` first; a task
    /// that filled a list or waited for a slot becomes a batcher
    /// (`ioc_set_batching`) and may allocate past a full list for
    /// `BLK_BATCH_REQ` requests or `BLK_BATCH_TIME`, as may a request the
    /// policy answers `Must` for, up to the hard cap of 3/2 × `nr_requests`.
    pub sync_lists: bool,
    /// The congestion bits of 2.6.30+ (with `sync_lists`): a list is
    /// congested from [`congestion_on`] requests until it falls below
    /// [`congestion_off`] (`get_request`, `freed_request`), and the async
    /// list's bit reaches the workload through [`Io::write_congested`], so
    /// the host's writeback backs off this queue as 2.6.32's
    /// `writeback_inodes_wb` does (`bdi_write_congested`). Off: the host
    /// judges congestion from its own writes in flight.
    pub congestion: bool,
    /// Plugging, or `None` (2.4 here, 2.6.39+ and blk-mq have none of
    /// this form). The queue plugs when a new request finds the policy
    /// empty, on a device that rotates or does not queue commands
    /// (`queue_should_plug`), and unplugs when `unplug_thresh` requests
    /// wait for the driver, after `unplug_delay`, when the workload waits
    /// ([`Io::unplug`]), when a submitter must sleep for a request, or
    /// when a completion runs the queue (`__blk_run_queue` removes the
    /// plug).
    pub plugging: Option<Plugging>,
    /// Stop here even if the workload has not finished.
    pub time_limit: Instant,
    /// Run the policy through the invariant checker
    /// ([`elevator_sched::check`]), as every run does when debug
    /// assertions are on: a broken promise panics with the run's context.
    pub check: bool,
    /// CPU time the policy spends per request under its one lock
    /// (`elevator_sched::cost`): the engine dispatches at most one request
    /// per this much time, so a fast device is held to the policy's rate
    /// (BFQ's documented 30-50 K IOPS per core on 4.x-era CPUs).
    /// `Duration::ZERO` (every preset): off, as for the 2003, 2009 and
    /// 2016 reproductions, whose devices are far slower than any policy.
    pub cpu_cost: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig::linux_26()
    }
}

impl EngineConfig {
    /// The 2.6 block layer: 128 requests per direction (BLKDEV_MAX_RQ),
    /// sleepers woken in order as slots free.
    pub fn linux_26() -> Self {
        EngineConfig {
            nr_requests: [NR_REQUESTS, NR_REQUESTS],
            batch_requests: 1,
            steal: false,
            inflight_limit: None,
            max_sectors: None,
            restart_before_wakeup: false,
            sync_lists: false,
            congestion: false,
            plugging: None,
            time_limit: Instant::NEVER,
            check: false,
            cpu_cost: Duration::ZERO,
        }
    }

    /// The 2.6.32 block layer: 128 requests per list (BLKDEV_MAX_RQ), the
    /// lists counting sync and async requests, batching and the policy's
    /// `may_queue` (see [`EngineConfig::sync_lists`]), the lists'
    /// congestion bits read by the host's writeback
    /// ([`EngineConfig::congestion`]), and plugging with `unplug_thresh`
    /// 4 and `unplug_delay` 3 ms ([`EngineConfig::plugging`]). Departures:
    /// a woken sleeper is the oldest waiting request of its list, one per
    /// freed slot, as `freed_request` wakes one exclusive waiter; the
    /// unplug timer fires at its instant, not through kblockd; the workload
    /// sees the congestion bit as it was when the engine called it, plus
    /// its own async writes of that call.
    pub fn linux_2632() -> Self {
        EngineConfig {
            sync_lists: true,
            congestion: true,
            plugging: Some(Plugging::LINUX_2632),
            ..EngineConfig::linux_26()
        }
    }

    /// The 2.4.20/2.4.21 block layer (drivers/block/ll_rw_blk.c:
    /// `blk_init_free_list`, `get_request`, `__get_request_wait`,
    /// `blkdev_release_request`): 128 requests dealt alternately to a read
    /// and a write free list, 64 each; a sleeper is woken only when its
    /// list has `batch_requests = min(128/4, 32) = 32` free, and new
    /// submitters take free slots before sleepers get them.
    ///
    /// On the 2003 machine's IDE disk two more properties of 2.4 matter:
    /// - requests of at most 128 sectors (64 KiB): 2.4's IDE driver sets
    ///   the per-device `max_sectors` to 128 (drivers/ide/ide-probe.c
    ///   `init_gendisk`: `*max_sect++ = ... 128`, the pdc4030 chipset 127;
    ///   2.4.21 `hwif->rqsize ? hwif->rqsize : 128`, rqsize set only by a
    ///   few chipset drivers), where 2.5 raised it to 255/256;
    /// - the next request starts from the completion interrupt: `ide_intr`
    ///   runs the handler that ends the request's buffers (waking the
    ///   readers) and then `ide_do_request` for the next request, all
    ///   before the woken processes run (drivers/ide/ide.c, 2.4.20).
    pub fn linux_24() -> Self {
        EngineConfig {
            nr_requests: [64, 64],
            batch_requests: 32,
            steal: true,
            inflight_limit: None,
            max_sectors: Some(IDE_24_MAX_SECTORS),
            restart_before_wakeup: true,
            sync_lists: false,
            congestion: false,
            plugging: None,
            time_limit: Instant::NEVER,
            check: false,
            cpu_cost: Duration::ZERO,
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// Virtual time when the run stopped.
    pub end: Instant,
    /// The time limit stopped the run before the workload finished.
    pub timed_out: bool,
    /// Requests completed (merged requests count each part).
    pub completed: u64,
    /// Requests the device failed (a merged request counts once).
    pub errors: u64,
    /// Engine iterations (distinct event instants handled).
    pub events: u64,
    pub device: DeviceStats,
    /// What the invariant checker saw, when the run was checked.
    pub check: Option<CheckReport>,
}

/// What the engine remembers of a submitted request until it completes.
#[derive(Clone, Copy, Debug)]
struct Part {
    submitted: Instant,
    op: Op,
    sector: Sector,
    sectors: u32,
    task: TaskId,
}

const READ: usize = 0;
const WRITE: usize = 1;

/// The request list of `r`: reads and writes, or (2.6.30+) sync (0) and
/// async (1). Reads are always sync (`rw_is_sync`).
fn list_of(r: &Request, sync_lists: bool) -> usize {
    list_of_op(r.op, r.sync, sync_lists)
}

/// [`list_of`] from a request's direction and sync flag.
fn list_of_op(op: Op, sync: bool, sync_lists: bool) -> usize {
    if op == Op::Read || (sync_lists && sync) {
        READ
    } else {
        WRITE
    }
}

/// A task's batching allowance (`ioc_batching`): requests left, and when it
/// last waited.
#[derive(Clone, Copy, Debug)]
struct Batch {
    left: u32,
    waited: Instant,
}

/// A policy and a device in virtual time.
#[derive(Debug)]
pub struct Engine {
    sched: Checked,
    /// Who is running (scenario, seed, replay command), for panics.
    context: String,
    device: Box<dyn Device>,
    config: EngineConfig,
    now: Instant,
    next_id: u64,
    timers: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    timer_seq: u64,
    sched_wake: Option<Instant>,
    parts: FxHashMap<RequestId, Part>,
    in_flight: FxHashMap<RequestId, (Request, Instant)>,
    /// Slots used per direction, and submitters waiting for one.
    allocated: [usize; 2],
    /// Sectors queued in the policy or in flight (for `inflight_limit`).
    sectors_allocated: u64,
    waiting: [VecDeque<Request>; 2],
    /// Lists marked full (`blk_queue_full`), with 2.6.32 allocation.
    full: [bool; 2],
    /// The lists' congestion bits (`BDI_sync_congested`,
    /// `BDI_async_congested`), with [`EngineConfig::congestion`].
    congested: [bool; 2],
    /// The queue is plugged until this instant (its unplug timer).
    plugged_until: Option<Instant>,
    batchers: FxHashMap<TaskId, Batch>,
    completed: u64,
    /// Requests the device failed (each counts once, merged or not).
    errors: u64,
    last_completion: Instant,
    // Scratch buffers reused across workload calls.
    submitted: Vec<Request>,
    armed: Vec<(Instant, u64)>,
    exited: Vec<TaskId>,
    /// The decision trace, when enabled: one line per insert, merge,
    /// dispatch (with the policy's reason), wait and completion.
    trace: Option<String>,
    /// Where the simulated time is published for a progress bar, if asked
    /// ([`Engine::publish_time`]).
    clock: Option<Arc<AtomicU64>>,
    /// With [`EngineConfig::cpu_cost`]: when the policy's CPU is free for
    /// the next dispatch, and the wake-up armed for it.
    cpu_free: Instant,
    cpu_wake: Option<Instant>,
}

/// Events between two stores of the simulated time in the published clock:
/// a store per some thousand events keeps the cost out of profiles (a run
/// of morton-7 handles millions of events), and the clock still moves many
/// times a second.
const CLOCK_EVERY: u64 = 4096;

impl Engine {
    pub fn new(sched: Box<dyn Scheduler>, device: Box<dyn Device>, config: EngineConfig) -> Self {
        let context = String::from("(no run context given)");
        let sched = if config.check || cfg!(debug_assertions) {
            let options = CheckOptions {
                // A throttled group waits as long as its limit says.
                liveness_limit: None,
                ..CheckOptions::default()
            };
            let on_violation = OnViolation::Panic {
                context: context.clone(),
            };
            Checked::new(sched, &device.limits(), options, on_violation)
        } else {
            Checked::unchecked(sched)
        };
        Engine {
            sched,
            context,
            device,
            config,
            now: Instant::ZERO,
            next_id: 1,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            sched_wake: None,
            parts: FxHashMap::default(),
            in_flight: FxHashMap::default(),
            allocated: [0, 0],
            sectors_allocated: 0,
            waiting: [VecDeque::new(), VecDeque::new()],
            full: [false, false],
            congested: [false, false],
            plugged_until: None,
            batchers: FxHashMap::default(),
            completed: 0,
            errors: 0,
            last_completion: Instant::ZERO,
            submitted: Vec::new(),
            armed: Vec::new(),
            exited: Vec::new(),
            trace: None,
            clock: None,
            cpu_free: Instant::ZERO,
            cpu_wake: None,
        }
    }

    /// Publish the simulated time (nanoseconds) in `clock` as the run goes,
    /// for a progress bar on another thread. Nothing reads it back: results
    /// are the same with or without it.
    pub fn publish_time(&mut self, clock: Arc<AtomicU64>) {
        self.clock = Some(clock);
    }

    /// Record the decision trace from now on (see [`Engine::take_trace`]).
    pub fn enable_trace(&mut self) {
        self.trace.get_or_insert_with(|| String::from(TRACE_HEADER));
    }

    /// The decision trace so far, blkparse-like: time, action (`I` queued,
    /// `M` merged into a queued request, `D` dispatched, `W` policy waits,
    /// `C` completed), direction (`R`, `W`, `S` for sync, `F` flush),
    /// `sector + sectors`, `[task]`, and the policy's reason.
    pub fn take_trace(&mut self) -> Option<String> {
        self.trace.take()
    }

    fn trace_line(&mut self, action: char, request: &Request, why: &str) {
        if let Some(t) = &mut self.trace {
            let rwbs = match (request.op, request.sync) {
                (Op::Read, _) => "R",
                (Op::Write, true) => "WS",
                (Op::Write, false) => "W",
                (Op::Flush, _) => "F",
            };
            let _ = writeln!(
                t,
                "{:>15.9}  {action}  {rwbs:<2} {:>10} + {:<4} [{}] {why}",
                self.now.as_secs_f64(),
                request.sector,
                request.sectors,
                request.task.0
            );
        }
    }

    /// Name the run for the messages of a failed check or engine
    /// assertion: the scenario, policy, seed and how to replay it.
    pub fn set_context(&mut self, context: String) {
        self.sched.set_context(context.clone());
        self.context = context;
    }

    /// Whether the policy runs through the invariant checker.
    pub fn checked(&self) -> bool {
        self.sched.enabled()
    }

    pub fn scheduler(&self) -> &dyn Scheduler {
        self.sched.inner()
    }

    /// A bug in the engine, the device or the workload: stop with the
    /// run's context.
    #[track_caller]
    fn bug(&self, message: std::fmt::Arguments<'_>) -> ! {
        panic!(
            "engine invariant violated at {}: {message}\n{}",
            self.now, self.context
        )
    }

    pub fn device(&self) -> &dyn Device {
        self.device.as_ref()
    }

    /// Request slots allocated now, per list (reads or sync, writes or
    /// async): zero once a run has drained, unless a slot leaked.
    pub fn slots_allocated(&self) -> [usize; 2] {
        self.allocated
    }

    /// Run `workload` until it finishes, nothing more can happen, or the
    /// time limit.
    pub fn run(&mut self, workload: &mut dyn Workload) -> RunSummary {
        let mut events = 0u64;
        let mut timed_out = false;
        // Nothing more could happen: everything submitted must be done.
        let mut exhausted = false;
        self.call(workload, |w, io| w.start(io));
        self.dispatch();
        while !workload.finished() {
            let next = [
                self.device.next_completion(),
                self.timers.peek().map(|Reverse((t, _, _))| *t),
                self.sched_wake,
                self.plugged_until,
                self.cpu_wake,
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                exhausted = true;
                break;
            };
            if next > self.config.time_limit {
                self.now = self.config.time_limit;
                timed_out = true;
                break;
            }
            if next < self.now {
                self.bug(format_args!("next event at {next} is in the past"));
            }
            self.now = next;
            events += 1;
            if events % CLOCK_EVERY == 0 {
                if let Some(clock) = &self.clock {
                    clock.store(self.now.nanos(), AtomicOrdering::Relaxed);
                }
            }

            while let Some((id, error)) = self.device.complete_status(self.now) {
                if self.config.restart_before_wakeup {
                    let done = self.retire(id);
                    self.dispatch();
                    self.wake_waiters();
                    self.deliver(done, error, workload);
                } else {
                    let done = self.retire(id);
                    self.wake_waiters();
                    self.deliver(done, error, workload);
                }
            }
            while let Some(&Reverse((t, _, token))) = self.timers.peek() {
                if t > self.now {
                    break;
                }
                self.timers.pop();
                self.call(workload, |w, io| w.wake(token, io));
            }
            if self.sched_wake.is_some_and(|t| t <= self.now) {
                self.sched_wake = None;
            }
            if self.cpu_wake.is_some_and(|t| t <= self.now) {
                self.cpu_wake = None;
            }
            // The unplug timer (`blk_unplug_timeout` → kblockd →
            // `generic_unplug_device`).
            if self.plugged_until.is_some_and(|t| t <= self.now) {
                self.unplug();
            }
            self.dispatch();
        }
        let check = self.sched.enabled().then(|| self.finish_check(exhausted));
        if let Some(clock) = &self.clock {
            clock.store(self.now.nanos(), AtomicOrdering::Relaxed);
        }
        RunSummary {
            end: self.now,
            timed_out,
            completed: self.completed,
            errors: self.errors,
            events,
            device: self.device.stats(),
            check,
        }
    }

    /// The checker's end-of-run checks: starvation always; nothing lost
    /// when the run drained or nothing more could happen (a run that ends
    /// when its measured jobs finish may leave background work queued).
    /// A run that drained with every submitted request completed holds no
    /// slot: one still allocated leaked (a merge the engine never heard
    /// of, see `Scheduler::take_freed_slot`).
    fn finish_check(&mut self, exhausted: bool) -> CheckReport {
        let drained = exhausted || self.parts.is_empty();
        let result = self.sched.finish(Duration::ZERO, self.now, drained);
        let report = match result {
            Ok(report) => report,
            Err(v) => unreachable!("a panicking checker returned {v}"),
        };
        if self.parts.is_empty() && self.allocated != [0, 0] {
            self.bug(format_args!(
                "every request completed but {:?} slots (reads or sync, writes or async) are \
                 still allocated: {} leaked them",
                self.allocated,
                self.sched.name()
            ));
        }
        report
    }

    /// Call the workload, then act on what it asked for.
    fn call(
        &mut self,
        workload: &mut dyn Workload,
        f: impl FnOnce(&mut dyn Workload, &mut Io<'_>),
    ) {
        let mut io = Io::new(
            self.now,
            &mut self.next_id,
            &mut self.submitted,
            &mut self.armed,
            &mut self.exited,
        );
        if self.config.congestion {
            io = io.with_congestion(Congestion {
                allocated: self.allocated[WRITE],
                on: congestion_on(self.config.nr_requests[WRITE]),
                congested: self.congested[WRITE],
            });
        }
        f(workload, &mut io);
        let unplug = io.unplug_requested();
        for (at, token) in self.armed.drain(..) {
            self.timers.push(Reverse((at, self.timer_seq, token)));
            self.timer_seq += 1;
        }
        for task in self.exited.drain(..) {
            self.sched.task_exited(task, self.now);
        }
        let mut submitted = std::mem::take(&mut self.submitted);
        for request in submitted.drain(..) {
            self.parts.insert(
                request.id,
                Part {
                    submitted: self.now,
                    op: request.op,
                    sector: request.sector,
                    sectors: request.sectors,
                    task: request.task,
                },
            );
            self.admit(request);
        }
        self.submitted = submitted;
        if unplug {
            self.unplug();
        }
    }

    /// Remove the plug (`blk_remove_plug`); the run loop then dispatches.
    fn unplug(&mut self) {
        self.plugged_until = None;
    }

    /// After a new request went into the policy: plug the queue if the
    /// policy was empty (`blk_plug_device` from `__make_request`, only
    /// where `queue_should_plug`: not on a non-rotational queue with
    /// command queueing), else unplug it once `unplug_thresh` requests
    /// wait for the driver (`elv_insert`).
    fn plug_after_insert(&mut self, was_empty: bool) {
        let Some(plugging) = self.config.plugging else {
            return;
        };
        let limits = self.device.limits();
        let should_plug = limits.rotational || limits.queue_depth <= 1;
        if was_empty && should_plug && self.plugged_until.is_none() {
            self.plugged_until = Some(self.now + plugging.unplug_delay);
        }
        if self.plugged_until.is_some() {
            let waiting_for_driver =
                (self.allocated[READ] + self.allocated[WRITE]).saturating_sub(self.in_flight.len());
            if waiting_for_driver >= plugging.unplug_thresh {
                self.unplug();
            }
        }
    }

    fn dir_of(&self, r: &Request) -> usize {
        list_of(r, self.config.sync_lists)
    }

    /// Give `request` a slot and the policy, or queue it for a slot.
    fn admit(&mut self, request: Request) {
        if self.config.sync_lists {
            return self.admit_2632(request);
        }
        let dir = self.dir_of(&request);
        let behind = !self.waiting[dir].is_empty() && !self.config.steal;
        if (behind || !self.may_allocate(dir)) && !self.merges_freely(dir, &request) {
            self.waiting[dir].push_back(request);
        } else {
            self.insert(request);
        }
    }

    /// 2.6.32's `get_request`: a request the policy would merge needs no
    /// slot; otherwise past `nr_requests` only a batcher or a `Must` may
    /// allocate, never past 3/2 × `nr_requests`; whoever fills the list
    /// becomes a batcher. A failed request waits; its task becomes a batcher
    /// when it is woken (`get_request_wait`).
    fn admit_2632(&mut self, request: Request) {
        let dir = self.dir_of(&request);
        if self.sched.would_merge(&request) {
            return self.insert(request);
        }
        let nr = self.config.nr_requests[dir];
        let must = self.sched.may_queue(&request, self.now) == elevator_sched::MayQueue::Must;
        let count = self.allocated[dir];
        let mut ok = self.waiting[dir].is_empty() || must || self.is_batcher(request.task);
        let mut congested = false;
        if count + 1 >= congestion_on(nr) {
            if count + 1 >= nr {
                if !self.full[dir] {
                    self.full[dir] = true;
                    self.set_batching(request.task);
                } else if !must && !self.is_batcher(request.task) {
                    ok = false;
                }
            }
            congested = ok;
        }
        if count >= nr.saturating_mul(3) / 2 {
            ok = false;
        }
        if !ok {
            self.waiting[dir].push_back(request);
            // `get_request_wait` unplugs the queue before it sleeps.
            self.unplug();
            return;
        }
        if congested && self.config.congestion {
            self.congested[dir] = true;
        }
        if let Some(b) = self.batchers.get_mut(&request.task) {
            b.left = b.left.saturating_sub(1);
        }
        self.insert(request);
    }

    /// `ioc_batching`: a full allowance, or some of it within
    /// `BLK_BATCH_TIME` of waiting.
    fn is_batcher(&self, task: TaskId) -> bool {
        self.batchers.get(&task).is_some_and(|b| {
            b.left == BLK_BATCH_REQ || (b.left > 0 && self.now < b.waited + BLK_BATCH_TIME)
        })
    }

    /// `ioc_set_batching`.
    fn set_batching(&mut self, task: TaskId) {
        if !self.is_batcher(task) {
            self.batchers.insert(
                task,
                Batch {
                    left: BLK_BATCH_REQ,
                    waited: self.now,
                },
            );
        }
    }

    /// A request that the policy would merge needs no slot: with slot
    /// stealing (2.4, where `__make_request` tries the elevator's merge
    /// before `get_request`) it goes in even while the slots are taken,
    /// unless earlier requests of its direction wait (they come first).
    fn merges_freely(&self, dir: usize, request: &Request) -> bool {
        self.config.steal && self.waiting[dir].is_empty() && self.sched.would_merge(request)
    }

    /// Whether a new request of direction `dir` may take a slot now.
    fn may_allocate(&self, dir: usize) -> bool {
        self.allocated[dir] < self.config.nr_requests[dir]
            && self
                .config
                .inflight_limit
                .is_none_or(|limit| self.sectors_allocated <= limit)
    }

    /// After a completion: wake one sleeper (the kernel's exclusive wait)
    /// per direction whose list has a batch of free slots (and, under an
    /// in-flight limit, once the sectors fell to three quarters of it).
    fn wake_waiters(&mut self) {
        if let Some(limit) = self.config.inflight_limit {
            if self.sectors_allocated > limit - limit / 4 {
                return;
            }
        }
        for dir in [READ, WRITE] {
            let free = self.config.nr_requests[dir].saturating_sub(self.allocated[dir]);
            // 2.4 sizes the batch as min(nr_requests / 4, 32).
            let batch = self
                .config
                .batch_requests
                .min(self.config.nr_requests[dir] / 4)
                .max(1);
            if self.waiting[dir].is_empty() || free < batch {
                continue;
            }
            // A woken request that merges took no slot: wake the next one.
            while self.may_allocate(dir) {
                let Some(next) = self.waiting[dir].pop_front() else {
                    break;
                };
                // 2.6.32: the woken task becomes a batcher (`get_request_wait`).
                if self.config.sync_lists {
                    self.batchers.insert(
                        next.task,
                        Batch {
                            left: BLK_BATCH_REQ - 1,
                            waited: self.now,
                        },
                    );
                }
                let before = self.allocated[dir];
                self.insert(next);
                if self.allocated[dir] > before {
                    break;
                }
            }
            // With stealing (2.4), the woken submitter goes on with what
            // merges into the request it just queued (its next buffers).
            while self.config.steal {
                match self.waiting[dir].front() {
                    Some(next) if self.sched.would_merge(next) => {
                        let next = self.waiting[dir].pop_front().expect("front");
                        self.insert(next);
                    }
                    _ => break,
                }
            }
        }
    }

    fn insert(&mut self, mut request: Request) {
        let dir = self.dir_of(&request);
        request.arrival = self.now;
        self.sectors_allocated += u64::from(request.sectors);
        let before = self.sched.queued();
        let was_empty = !self.sched.has_work();
        let traced = self.trace.is_some().then(|| request.clone());
        self.sched.insert(request, self.now);
        // A merge takes no new slot; coalescing two queued requests frees one.
        let after = self.sched.queued();
        if let Some(r) = traced {
            let (action, why) = if after > before {
                ('I', "")
            } else {
                ('M', "merged")
            };
            self.trace_line(action, &r, why);
        }
        // Coalescing two queued requests frees a slot of this direction,
        // so the count can fall, never below zero.
        self.allocated[dir] = match (self.allocated[dir] + after).checked_sub(before) {
            Some(n) => n,
            None => self.bug(format_args!(
                "insert left {after} queued of {before}, more than the {} slots of its \
                 direction could free",
                self.allocated[dir]
            )),
        };
        if after > before {
            self.plug_after_insert(was_empty);
        }
    }

    /// Feed the device while it has free slots and the policy has work.
    fn dispatch(&mut self) {
        if self.plugged_until.is_some() {
            return;
        }
        let depth = self.device.limits().queue_depth as usize;
        while self.device.in_flight() < depth {
            // The policy's CPU is still busy with the request before.
            if self.cpu_free > self.now {
                if self.sched.has_work() {
                    self.cpu_wake = Some(self.cpu_free);
                }
                return;
            }
            let answer = self.sched.dispatch(self.now);
            self.free_late_merges();
            match answer {
                Dispatch::Request(request) => {
                    if self.trace.is_some() {
                        let why = self.sched.dispatch_reason().unwrap_or("");
                        self.trace_line('D', &request, why);
                    }
                    self.device.submit(&request, self.now);
                    if self.config.cpu_cost > Duration::ZERO {
                        self.cpu_free = self.now + self.config.cpu_cost;
                    }
                    let id = request.id;
                    if self.in_flight.insert(id, (request, self.now)).is_some() {
                        self.bug(format_args!("{id:?} dispatched while already in flight"));
                    }
                }
                Dispatch::Wait { until } => {
                    if until <= self.now {
                        self.bug(format_args!(
                            "{} answered Wait until {until}, not in the future",
                            self.sched.name()
                        ));
                    }
                    let wake = Some(until);
                    if self.trace.is_some() && self.sched_wake != wake {
                        let why = self.sched.dispatch_reason().unwrap_or("");
                        let until = if until == Instant::NEVER {
                            "a completion".to_string()
                        } else {
                            format!("{:.9}", until.as_secs_f64())
                        };
                        let now = self.now.as_secs_f64();
                        if let Some(t) = &mut self.trace {
                            let _ = writeln!(t, "{now:>15.9}  W  until {until}: {why}");
                        }
                    }
                    self.sched_wake = wake;
                    return;
                }
                Dispatch::Empty => {
                    self.sched_wake = None;
                    return;
                }
            }
        }
    }

    /// Free the slots of requests a layer handed its policy in `dispatch`
    /// or `complete` that merged there (`Scheduler::take_freed_slot`; the
    /// group layers and writeback throttling release held requests so).
    /// Sleepers are woken at the next completion, as after any freed slot
    /// outside one.
    fn free_late_merges(&mut self) {
        while let Some(slot) = self.sched.take_freed_slot() {
            let dir = list_of_op(slot.op, slot.sync, self.config.sync_lists);
            let Some(slots) = self.allocated[dir].checked_sub(1) else {
                self.bug(format_args!(
                    "{} freed a slot of a merged {:?} request with none allocated",
                    self.sched.name(),
                    slot.op
                ))
            };
            self.allocated[dir] = slots;
            if slots < self.config.nr_requests[dir] {
                self.full[dir] = false;
            }
            if slots < congestion_off(self.config.nr_requests[dir]) {
                self.congested[dir] = false;
            }
        }
    }

    /// The device finished `id`: tell the policy and free the slot.
    fn retire(&mut self, id: RequestId) -> (Request, Instant) {
        let Some((request, dispatched)) = self.in_flight.remove(&id) else {
            self.bug(format_args!(
                "device completed {id:?}, which is not in flight"
            ))
        };
        self.sched.complete(&request, self.now);
        // io.latency lets held requests in at a completion.
        self.free_late_merges();
        if self.trace.is_some() {
            self.trace_line('C', &request, "");
        }
        let dir = self.dir_of(&request);
        let Some(slots) = self.allocated[dir].checked_sub(1) else {
            self.bug(format_args!("{request} completed with no slot allocated"))
        };
        self.allocated[dir] = slots;
        // `freed_request`: below nr_requests the list is no longer full.
        if self.allocated[dir] < self.config.nr_requests[dir] {
            self.full[dir] = false;
        }
        if self.allocated[dir] < congestion_off(self.config.nr_requests[dir]) {
            self.congested[dir] = false;
        }
        // The driver's completion runs the queue, and `__blk_run_queue`
        // removes the plug first (v2.6.32 block/blk-core.c).
        self.unplug();
        let Some(sectors) = self
            .sectors_allocated
            .checked_sub(u64::from(request.sectors))
        else {
            self.bug(format_args!(
                "{request} completed with only {} sectors allocated",
                self.sectors_allocated
            ))
        };
        self.sectors_allocated = sectors;
        (request, dispatched)
    }

    /// Tell the workload that each part of a retired request completed.
    fn deliver(
        &mut self,
        done: (Request, Instant),
        error: Option<IoError>,
        workload: &mut dyn Workload,
    ) {
        if error.is_some() {
            self.errors += 1;
        }
        let (request, dispatched) = done;
        let service = self.now.since(dispatched.max(self.last_completion));
        self.last_completion = self.now;
        let total_sectors = u64::from(request.sectors.max(1));
        for part_id in request.ids() {
            let Some(part) = self.parts.remove(&part_id) else {
                self.bug(format_args!(
                    "{part_id:?} completed twice or never submitted"
                ))
            };
            self.completed += 1;
            let done = Completion {
                id: part_id,
                op: part.op,
                sector: part.sector,
                sectors: part.sectors,
                task: part.task,
                submitted: part.submitted,
                dispatched,
                completed: self.now,
                error,
                disk_time: Duration(
                    (u128::from(service.nanos()) * u128::from(part.sectors)
                        / u128::from(total_sectors)) as u64,
                ),
            };
            self.call(workload, |w, io| w.completed(&done, io));
        }
        self.call(workload, |w, io| w.request_done(io));
    }
}
