//! anticipatory: deadline batches plus a short, deliberate idle after each
//! synchronous read, betting that the same task reads nearby next.
//!
//! The Linux 2.6 anticipatory scheduler, "AS" (block/as-iosched.c, 2.6.0 to
//! 2.6.32, Nick Piggin after Jens Axboe's deadline; removed in 2.6.33;
//! Documentation/block/as-iosched.txt), itself an implementation of Iyer
//! and Druschel, "Anticipatory scheduling: a disk scheduling framework to
//! overcome deceptive idleness in synchronous I/O", SOSP 2001. This module
//! follows the 2.6.32 text; its defaults are 2.6.32's, and the 2003
//! scenarios set those of 2.5.74-2.6.1 ([`DEFAULTS_2003_MS`]).
//!
//! # The problem it solves
//! A task reading a file issues one read, waits for it, thinks a little and
//! issues the next, close to the first. A work-conserving scheduler sees an
//! empty read queue the moment the read completes and turns the head to the
//! writeback stream; the next read then pays two long seeks. AS keeps the
//! disk idle for up to `antic_expire` after a synchronous request completes,
//! waiting for its task's next request ("anticipation"), and dispatches the
//! queued writes only when that bet looks lost.
//!
//! # Structure
//! Requests are split into synchronous (reads and sync writes) and
//! asynchronous (writeback), the kernel's `BLK_RW_SYNC`/`BLK_RW_ASYNC`. Each
//! direction has a sector-sorted queue and a FIFO with deadlines
//! `arrival + read_expire` or `arrival + write_expire`.
//!
//! Service runs in batches of one direction. A read batch lasts
//! `read_batch_expire`, timed from its first completion, and is extended
//! while no writes wait; a write batch lasts `write_batch_expire` or
//! `write_batch_count` requests, whichever ends first. A new batch starts
//! only after every request of the old one has completed, at the oldest
//! request of its direction. Inside a batch requests go in one-way elevator
//! order from the head (`choose_req`): forward, or backward by at most
//! [`MAXBACK`] sectors at [`BACK_PENALTY`] times the cost; the sweep wraps
//! to the lowest sector. The FIFO of the running direction is looked at
//! once per `read_expire`/`write_expire` at most, and an expired head is
//! served first.
//!
//! `write_batch_count` adapts (kernel `update_write_batch`) when the next
//! read batch starts: a write batch that overran its target by more than 3×
//! halves it, one that overran a little loses one; one that used all its
//! requests in less than a third of the target doubles it, in less than the
//! target gains one; never below 1. It starts at write_batch_expire in
//! jiffies divided by 10 (12), at least 2.
//!
//! # Anticipation
//! Anticipation states ([`AnticStatus`]): `Off`; `WaitReq` (the awaited
//! task's request is still on the device); `WaitNext` (it completed, the
//! timer runs until `completion + antic_expire`); `Finished` (a candidate
//! arrived or the timer fired: dispatch). In `WaitReq`/`WaitNext` the
//! policy answers [`Dispatch::Wait`].
//!
//! When a read batch has no next request, or its next request is not the
//! one we hope for, the policy anticipates unless one of these holds
//! (kernel `as_can_break_anticipation`):
//! 1. the candidate comes from the anticipated task;
//! 2. the awaited request completed and `antic_expire` has passed since;
//! 3. the anticipated task already has requests queued;
//! 4. the candidate is synchronous and close to the head (`close_req`):
//!    within 8192 sectors, a window that doubles with every millisecond of
//!    waiting (every request is close after 20 ms or `antic_expire`), or
//!    nearer than the anticipated task's mean seek distance, its seek
//!    pattern saying its own next request would be no closer (for a task
//!    without history: the mean first seek of new tasks); the candidate
//!    then also counts in that task's history (a cooperating process);
//! 5. the anticipated task has exited;
//! 6. its mean think time exceeds `antic_expire`, the whole wait, not what
//!    is left of it (for a task with no history yet: the mean first think
//!    time of new tasks does).
//!
//! A newly inserted request that satisfies one of these ends a running
//! anticipation; so does [`Scheduler::task_exited`] for the awaited task.
//!
//! Per-task statistics, keyed by [`TaskId`] (the kernel's `as_io_context`):
//! think time (completion of the task's last synchronous request to arrival
//! of its next, capped at 19 ms, 0 while it has requests queued) and seek
//! distance (from the end of its previous request), both as the kernel's
//! fixed-point moving averages (see [`crate::stats`]); whether the task has
//! exited; its queued and in-flight counts.
//!
//! # Units
//! Tunables are integers in the sysfs unit, milliseconds. The kernel keeps
//! them in jiffies; at HZ=1000 a jiffy is 1 ms, so `antic_expire` =
//! HZ/150 = 6 jiffies shows as 6 in sysfs (the exact 1/150 s ≈ 6.7 ms is
//! not what any kernel ran: at HZ=250 it was 4 ms, at HZ=100 10 ms). Inside,
//! times are nanoseconds; the one place the kernel does arithmetic on
//! jiffies, `close_req`'s window `8192 << delay`, counts whole milliseconds.
//!
//! # Departures from the kernel
//! - The kernel counts a task's `nr_dispatched` only until the driver
//!   starts the request (`as_activate_request`). Here dispatching is
//!   starting, so that count is always zero and is left out; the in-flight
//!   count we keep decides only when a finished task's statistics can go.
//! - On exit the kernel hedged: it kept waiting for a cooperating process
//!   unless more than half of past waits on exited tasks had been in vain
//!   (`exit_no_coop`). Here an exited task is never anticipated, and its
//!   exit ends a running anticipation at once, so `exit_no_coop` is gone.
//! - The anticipated task may not exceed the queue's request slots here
//!   (the kernel's `as_may_queue` let it): slots belong to the engine.
//! - No front merges: 2.6.32's `as_merge` looked the front-merge candidate
//!   up in `sort_list[bio_data_dir(bio)]`, indexed by read/write, while the
//!   lists are indexed by sync/async, so reads and writeback never
//!   front-merged. Back merges (the elevator core's hash) are done.
//!
//! # Invariants
//! Each queued request is in exactly one direction's sorted queue and FIFO;
//! `next_rq[d]` is `Some` exactly when direction `d` has requests; while
//! anticipating, the anticipated task has a statistics entry and no request
//! queued; `changed_batch` implies requests are on the device.
//!
//! # Starvation bound
//! With a queue depth of 1 every batch starts at the oldest request of its
//! direction (the old batch has always drained when the engine asks), and
//! inside a batch of that direction the expired FIFO head is served at
//! least every `E + s + A` (E the larger expiry, s the service time, A
//! `antic_expire`). A batch of the other direction lasts at most its batch
//! time plus `2s + A`. So once a request's deadline has passed, one of the
//! at most `max_queued` requests ahead of it in its FIFO (or itself) is
//! served within every `W = E + read_batch_expire + write_batch_expire +
//! 2A + 4s`, and it waits at most `E + max_queued × W`. With a deeper
//! queue a new batch waits for the old one to drain and then continues the
//! sweep instead of starting at the oldest request; writes then rely on the
//! sweep alone (their batches are shorter than write_expire, so their FIFO
//! is never checked), which a stream of writes near the head can hold off
//! indefinitely: no bound is claimed.

use crate::queue::MergeOutcome;
use crate::stats::Ewma;
use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, SortedQueue, Tunable, Tunables};
use elevator_core::{Duration, Instant, QueueLimits, Request, RequestId, Sector, TaskId};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// Reads expire after 125 ms (`default_read_expire`, HZ/8).
pub const READ_EXPIRE_MS: i64 = 125;
/// Writes expire after 250 ms (`default_write_expire`, HZ/4); a soft limit.
pub const WRITE_EXPIRE_MS: i64 = 250;
/// A read batch lasts 500 ms while writes wait (`default_read_batch_expire`, HZ/2).
pub const READ_BATCH_EXPIRE_MS: i64 = 500;
/// Target length of a write batch, 125 ms (`default_write_batch_expire`, HZ/8).
pub const WRITE_BATCH_EXPIRE_MS: i64 = 125;
/// Longest anticipation, HZ/150 jiffies = 6 ms at HZ=1000
/// (`default_antic_expire`, at least one jiffy).
pub const ANTIC_EXPIRE_MS: i64 = 6;

/// The defaults AS was merged with (2.5.74, 4 Jul 2003) and kept through
/// 2.6.1, in ms at HZ=1000: `read_expire` HZ/20, `write_expire` HZ/5,
/// `read_batch_expire` HZ/5, `write_batch_expire` HZ/20 (`antic_expire`
/// HZ/150 unchanged). "AS tuning" (2.6.2, Jan 2004) and "AS: increase batch
/// expiry intervals" (2.6.7, May 2004) raised them to the values above. The
/// 2003 scenarios set these: the seed ran AS from 2.5.61-mm1, of the same
/// series, and the merge's own text describes `read_expire` = 50 ("a request
/// might take anywhere < 100ms"), as Nick Piggin does in the seed's thread
/// ("read_expire*2 in the current implementation").
pub const DEFAULTS_2003_MS: [(&str, i64); 4] = [
    ("read_expire", 50),
    ("write_expire", 200),
    ("read_batch_expire", 200),
    ("write_batch_expire", 50),
];

/// Think times are clamped below 20 ms (`MAX_THINKTIME`, HZ/50): a task
/// waiting for its user should not look like a slow reader for ever.
const MAX_THINKTIME: Duration = Duration::from_millis(20);
/// One jiffy at HZ=1000; the kernel clamps think time to MAX_THINKTIME - 1.
const JIFFY: Duration = Duration::from_millis(1);
/// The elevator may seek backward by at most 1 Mi sectors, 512 MiB (`MAXBACK`).
pub const MAXBACK: Sector = 1024 * 1024;
/// A backward seek counts twice its distance (`BACK_PENALTY`).
pub const BACK_PENALTY: Sector = 2;
/// `close_req`'s window before any waiting: 8192 sectors, 4 MiB.
const CLOSE_WINDOW: Sector = 8192;
/// `close_req` stops widening after 20 ms of waiting (`20 * HZ / 1000`).
const CLOSE_MAX_DELAY_MS: u64 = 20;

pub const TYPE: SchedulerType = SchedulerType {
    name: "anticipatory",
    aliases: &["as"],
    about: "deadline batches plus idling for the next nearby read (Linux 2.6 AS)",
    honours: &[],
    tunables: &[
        Tunable {
            name: "read_expire",
            default: READ_EXPIRE_MS,
            unit: "ms",
            about: "deadline of a sync request after its arrival; also the FIFO check interval",
        },
        Tunable {
            name: "write_expire",
            default: WRITE_EXPIRE_MS,
            unit: "ms",
            about: "deadline of an async write after its arrival",
        },
        Tunable {
            name: "read_batch_expire",
            default: READ_BATCH_EXPIRE_MS,
            unit: "ms",
            about: "length of a read batch while writes wait",
        },
        Tunable {
            name: "write_batch_expire",
            default: WRITE_BATCH_EXPIRE_MS,
            unit: "ms",
            about: "target length of a write batch (tunes write_batch_count)",
        },
        Tunable {
            name: "antic_expire",
            default: ANTIC_EXPIRE_MS,
            unit: "ms",
            about: "longest idle wait for the anticipated task (0 disables anticipation)",
        },
    ],
    build: |t, limits| Box::new(Anticipatory::from_tunables(t, limits)),
};

/// Kernel `BLK_RW_ASYNC` and `BLK_RW_SYNC`, the indices of the directions.
const ASYNC: usize = 0;
const SYNC: usize = 1;

fn dir_of(r: &Request) -> usize {
    if r.is_read() || r.sync {
        SYNC
    } else {
        ASYNC
    }
}

/// Where anticipation stands (kernel `enum anticipation_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnticStatus {
    /// Not anticipating.
    Off,
    /// Anticipating; the awaited task's last request is still on the device.
    WaitReq,
    /// Anticipating; that request completed and the timer runs.
    WaitNext,
    /// A candidate arrived or the timer fired: dispatch, then `Off`.
    Finished,
}

/// The kernel's mean seek distance: same moving average as [`Ewma`] but
/// rounded `(total + samples/2) / samples`, and clamped against outliers.
#[derive(Clone, Copy, Debug, Default)]
struct SeekMean {
    samples: u64,
    total: u64,
    mean: Sector,
}

impl SeekMean {
    fn add(&mut self, distance: Sector) {
        // An odd page-in far away should not wreck the mean: clamp to four
        // times the mean plus 1 GiB while young, plus 64 MiB once settled.
        let slack = if self.samples <= 60 {
            2 * 1024 * 1024
        } else {
            2 * 1024 * 64
        };
        let distance = distance.min(self.mean.saturating_mul(4).saturating_add(slack));
        self.samples = (7 * self.samples + 256) / 8;
        self.total = (7 * self.total + 256 * distance) / 8;
        self.mean = (self.total + self.samples / 2) / self.samples;
    }
}

/// What AS knows of one task (kernel `struct as_io_context`).
#[derive(Clone, Debug)]
struct TaskIo {
    /// Not exited (`AS_TASK_RUNNING`).
    running: bool,
    /// Has queued a sync request before (`AS_TASK_IOSTARTED`).
    io_started: bool,
    /// Has had a sync request complete (`AS_TASK_IORUNNING`).
    io_running: bool,
    last_end_request: Instant,
    /// End sector of its last sync request.
    last_request_pos: Sector,
    /// Think time in ns.
    ttime: Ewma,
    seek: SeekMean,
    nr_queued: u32,
    in_flight: u32,
}

impl TaskIo {
    fn new() -> Self {
        TaskIo {
            running: true,
            io_started: false,
            io_running: false,
            last_end_request: Instant::ZERO,
            last_request_pos: 0,
            ttime: Ewma::default(),
            seek: SeekMean::default(),
            nr_queued: 0,
            in_flight: 0,
        }
    }
}

/// Statistics of tasks' first samples, used for tasks without history,
/// and how often anticipated newcomers never came back (kernel `est_time`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EstTime {
    /// Chance (×256) that an anticipated task with no think-time history
    /// did not come back in time.
    pub exit_prob: u64,
    /// Decayed mean of tasks' first think times, ns.
    pub new_ttime_mean: u64,
    new_ttime_total: u64,
    /// Decayed mean of tasks' first seek distances, sectors.
    pub new_seek_mean: Sector,
    new_seek_total: u64,
}

/// The fields of a request that the anticipation rules look at.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    task: TaskId,
    sector: Sector,
    end: Sector,
    sync: bool,
}

impl Candidate {
    fn of(r: &Request) -> Self {
        Candidate {
            task: r.task,
            sector: r.sector,
            end: r.end(),
            sync: dir_of(r) == SYNC,
        }
    }
}

/// One direction's queues.
#[derive(Debug, Default)]
struct Direction {
    sorted: SortedQueue,
    /// (deadline, id), earliest first: the kernel's `fifo_list`.
    fifo: BTreeSet<(Instant, RequestId)>,
    /// Deadline and owner of each queued request.
    meta: FxHashMap<RequestId, (Instant, TaskId)>,
}

impl Direction {
    fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    fn fifo_head(&self) -> Option<(Instant, RequestId)> {
        self.fifo.iter().next().copied()
    }
}

/// The anticipatory policy.
#[derive(Debug)]
pub struct Anticipatory {
    /// Why the last dispatch answered as it did (the decision trace).
    reason: &'static str,
    /// How the last anticipation ended, told by the next dispatch.
    antic_end: &'static str,
    dirs: [Direction; 2],
    fifo_expire: [Duration; 2],
    batch_expire: [Duration; 2],
    antic_expire: Duration,
    queue_depth: u32,
    rule: MergeRule,

    /// Next request in elevator order, per direction.
    next_rq: [Option<RequestId>; 2],
    /// End sector of the last dispatch, per direction.
    last_sector: [Sector; 2],
    last_check_fifo: [Instant; 2],

    batch_dir: usize,
    current_batch_expires: Instant,
    /// Waiting for the old batch to drain before the new one starts.
    changed_batch: bool,
    /// A read batch whose clock starts at its first completion.
    new_batch: bool,
    write_batch_count: u32,
    current_write_count: u32,
    write_batch_idled: bool,

    antic_status: AnticStatus,
    antic_start: Instant,
    /// The task whose next request we would wait for: the owner of the last
    /// sync dispatch, `None` after an async one (kernel `ad->io_context`).
    antic_task: Option<TaskId>,
    /// A request of `antic_task` completed since the last dispatch.
    ioc_finished: bool,
    /// Requests on the device.
    nr_dispatched: usize,

    tasks: FxHashMap<TaskId, TaskIo>,
    est: EstTime,
}

impl Anticipatory {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        let ms = |name| Duration::from_millis(t.get(name) as u64);
        // write_batch_count starts at write_batch_expire (in jiffies, i.e.
        // ms at HZ=1000) / 10, at least 2 (as_init_queue).
        let write_batch_count = ((t.get("write_batch_expire") / 10) as u32).max(2);
        Anticipatory {
            dirs: Default::default(),
            fifo_expire: [ms("write_expire"), ms("read_expire")],
            batch_expire: [ms("write_batch_expire"), ms("read_batch_expire")],
            antic_expire: ms("antic_expire"),
            queue_depth: limits.queue_depth.max(1),
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: false,
                same_task: false,
            },
            next_rq: [None, None],
            last_sector: [0, 0],
            last_check_fifo: [Instant::ZERO; 2],
            // The kernel's zeroed as_data starts in "a write batch", so the
            // first read starts a read batch (and tunes write_batch_count).
            batch_dir: ASYNC,
            current_batch_expires: Instant::ZERO + ms("read_batch_expire"),
            changed_batch: false,
            new_batch: false,
            write_batch_count,
            current_write_count: 0,
            write_batch_idled: false,
            antic_status: AnticStatus::Off,
            reason: "",
            antic_end: "",
            antic_start: Instant::ZERO,
            antic_task: None,
            ioc_finished: false,
            nr_dispatched: 0,
            tasks: FxHashMap::default(),
            est: EstTime::default(),
        }
    }

    /// With the kernel's defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        Anticipatory::from_tunables(&t, limits)
    }

    /// The anticipation state, for inspection.
    pub fn antic_status(&self) -> AnticStatus {
        self.antic_status
    }

    /// The task being anticipated, if the last dispatch was synchronous.
    pub fn anticipated_task(&self) -> Option<TaskId> {
        self.antic_task
    }

    /// Requests per write batch, as tuned so far.
    pub fn write_batch_count(&self) -> u32 {
        self.write_batch_count
    }

    /// The kernel's read-only `est_time` statistics.
    pub fn est_time(&self) -> EstTime {
        self.est
    }

    /// A task's mean think time and mean seek distance, once it has samples.
    pub fn task_means(&self, task: TaskId) -> Option<(Duration, Sector)> {
        let t = self.tasks.get(&task)?;
        (t.ttime.samples() > 0).then(|| (Duration(t.ttime.mean()), t.seek.mean))
    }

    /// Whether the running (or last) batch is a read (sync) batch.
    pub fn in_read_batch(&self) -> bool {
        self.batch_dir == SYNC
    }

    // ----- elevator order -----

    /// The better of two requests of direction `dir` for a head at
    /// `last_sector[dir]` (kernel `as_choose_req`).
    fn choose_req(
        &self,
        dir: usize,
        a: Option<RequestId>,
        b: Option<RequestId>,
    ) -> Option<RequestId> {
        let (a, b) = match (a, b) {
            (None, b) => return b,
            (a, None) => return a,
            (Some(a), Some(b)) if a == b => return Some(b),
            (Some(a), Some(b)) => (a, b),
        };
        let q = &self.dirs[dir].sorted;
        let s1 = q.get(a).expect("queued").sector;
        let s2 = q.get(b).expect("queued").sector;
        let last = self.last_sector[dir];
        // Distance from the head, or None if behind it beyond MAXBACK.
        let cost = |s: Sector| {
            if s >= last {
                Some(s - last)
            } else if s + MAXBACK >= last {
                Some((last - s) * BACK_PENALTY)
            } else {
                None
            }
        };
        match (cost(s1), cost(s2)) {
            (Some(_), None) => Some(a),
            (None, Some(_)) => Some(b),
            // Both far behind: the lower one, one long seek back.
            (None, None) => Some(if s1 <= s2 { a } else { b }),
            (Some(d1), Some(d2)) if d1 != d2 => Some(if d1 < d2 { a } else { b }),
            _ => Some(if s1 >= s2 { a } else { b }),
        }
    }

    /// The request to serve after `id` (kernel `as_find_next_rq`): the
    /// better of its neighbours, wrapping to the lowest sector at the top.
    fn find_next(&self, dir: usize, id: RequestId) -> Option<RequestId> {
        let q = &self.dirs[dir].sorted;
        let prev = q.prev_before(id);
        let next = q.next_after(id).or_else(|| q.first().filter(|&f| f != id));
        self.choose_req(dir, next, prev)
    }

    // ----- statistics -----

    /// Record `rq`'s arrival in `owner`'s history (kernel `as_update_iohist`);
    /// `owner` is `rq`'s task, or the anticipated task when a close request
    /// of another task stands in for it.
    fn update_iohist(&mut self, owner: TaskId, rq: &Candidate, now: Instant) {
        if !rq.sync {
            return;
        }
        let Some(aic) = self.tasks.get_mut(&owner) else {
            return;
        };
        if aic.io_running || aic.io_started {
            let mut thinktime = 0;
            if aic.io_running && aic.nr_queued == 0 {
                thinktime = now
                    .since(aic.last_end_request)
                    .min(MAX_THINKTIME - JIFFY)
                    .nanos();
            }
            if aic.ttime.samples() == 0 {
                let est = &mut self.est;
                est.new_ttime_total = (7 * est.new_ttime_total + 256 * thinktime) / 8;
                est.new_ttime_mean = est.new_ttime_total / 256;
                est.exit_prob = 7 * est.exit_prob / 8;
            }
            aic.ttime.add(thinktime);

            let distance = rq.sector.abs_diff(aic.last_request_pos);
            if aic.seek.samples == 0 {
                let est = &mut self.est;
                est.new_seek_total = (7 * est.new_seek_total + 256 * distance) / 8;
                est.new_seek_mean = est.new_seek_total / 256;
            }
            aic.seek.add(distance);
        }
        aic.last_request_pos = rq.end;
        aic.io_started = true;
    }

    /// Forget a task that exited and has nothing left here.
    fn maybe_forget(&mut self, task: TaskId) {
        if self.antic_task == Some(task) {
            return;
        }
        if let Some(t) = self.tasks.get(&task) {
            if !t.running && t.nr_queued == 0 && t.in_flight == 0 {
                self.tasks.remove(&task);
            }
        }
    }

    // ----- anticipation -----

    fn antic_deadline(&self) -> Instant {
        self.antic_start + self.antic_expire
    }

    fn antic_expired(&self, now: Instant) -> bool {
        now.since(self.antic_start) >= self.antic_expire
    }

    /// The anticipation timer (kernel `as_antic_timeout`), run lazily at
    /// the first call at or after its expiry.
    fn tick(&mut self, now: Instant) {
        if self.antic_status == AnticStatus::WaitNext && now >= self.antic_deadline() {
            self.antic_status = AnticStatus::Finished;
            self.antic_end = "anticipation timed out";
            let task = self.antic_task.expect("anticipating a task");
            if self
                .tasks
                .get(&task)
                .is_some_and(|t| t.ttime.samples() == 0)
            {
                // A newcomer that did not come back in time.
                self.est.exit_prob = (7 * self.est.exit_prob + 256) / 8;
            }
        }
    }

    fn antic_stop(&mut self) {
        if matches!(
            self.antic_status,
            AnticStatus::WaitReq | AnticStatus::WaitNext
        ) {
            self.antic_status = AnticStatus::Finished;
        }
    }

    /// Start waiting (kernel `as_antic_waitreq`/`as_antic_waitnext`).
    fn antic_wait(&mut self) {
        debug_assert_eq!(self.antic_status, AnticStatus::Off);
        self.antic_status = if self.ioc_finished {
            AnticStatus::WaitNext
        } else {
            AnticStatus::WaitReq
        };
    }

    /// The answer while anticipating.
    fn antic_wait_answer(&self) -> Dispatch {
        match self.antic_status {
            // The timer starts when the awaited request completes.
            AnticStatus::WaitReq => Dispatch::Wait {
                until: Instant::NEVER,
            },
            AnticStatus::WaitNext => Dispatch::Wait {
                until: self.antic_deadline(),
            },
            other => unreachable!("not waiting in {other:?}"),
        }
    }

    /// Whether `rq` lies close enough to the head to be worth serving
    /// instead of waiting (kernel `as_close_req`).
    fn close_req(&self, aic: &TaskIo, rq: &Candidate, now: Instant) -> bool {
        // Whole jiffies (ms at HZ=1000) since the awaited request completed.
        let delay = if self.antic_status == AnticStatus::Off || !self.ioc_finished {
            0
        } else {
            now.since(self.antic_start).nanos() / JIFFY.nanos()
        };
        let antic_expire_jiffies = self.antic_expire.nanos() / JIFFY.nanos();
        let delta = if delay == 0 {
            CLOSE_WINDOW
        } else if delay <= CLOSE_MAX_DELAY_MS && delay <= antic_expire_jiffies {
            CLOSE_WINDOW << delay
        } else {
            return true;
        };
        let last = self.last_sector[self.batch_dir];
        let next = rq.sector;
        if last <= next + delta / 2 && next <= last + delta {
            return true;
        }
        let distance = next.abs_diff(last);
        if aic.seek.samples == 0 {
            self.est.new_seek_mean > distance
        } else {
            aic.seek.mean > distance
        }
    }

    /// Whether to stop (or not start) waiting for the anticipated task,
    /// with `rq` the request we could serve instead, if any (kernel
    /// `as_can_break_anticipation`; the rules are listed in the module doc).
    fn can_break_anticipation(&mut self, rq: Option<&Candidate>, now: Instant) -> bool {
        let task = self.antic_task.expect("anticipating a task");
        if rq.is_some_and(|rq| rq.task == task) {
            return true;
        }
        if self.ioc_finished && self.antic_expired(now) {
            return true;
        }
        let Some(aic) = self.tasks.get(&task) else {
            return false;
        };
        if aic.nr_queued > 0 {
            return true;
        }
        if let Some(rq) = rq {
            if rq.sync && self.close_req(aic, rq, now) {
                // A cooperating task works nearby: count it as ours.
                self.update_iohist(task, rq, now);
                return true;
            }
        }
        let aic = &self.tasks[&task];
        if !aic.running {
            return true;
        }
        if aic.ttime.samples() == 0 {
            Duration(self.est.new_ttime_mean) > self.antic_expire
        } else {
            Duration(aic.ttime.mean()) > self.antic_expire
        }
    }

    /// Whether to wait rather than serve `rq` (kernel `as_can_anticipate`).
    fn can_anticipate(&mut self, rq: Option<RequestId>, now: Instant) -> bool {
        if self.antic_task.is_none() || self.antic_status == AnticStatus::Finished {
            return false;
        }
        let rq = rq.map(|id| Candidate::of(self.dirs[SYNC].sorted.get(id).expect("queued")));
        !self.can_break_anticipation(rq.as_ref(), now)
    }

    // ----- batches and FIFOs -----

    /// Whether the running batch is over (kernel `as_batch_expired`).
    fn batch_expired(&self, now: Instant) -> bool {
        if self.changed_batch || self.new_batch {
            return false;
        }
        if self.batch_dir == SYNC {
            now > self.current_batch_expires
        } else {
            now > self.current_batch_expires || self.current_write_count == 0
        }
    }

    /// Whether `dir`'s oldest request is past its deadline; looked at no
    /// more than once per `fifo_expire[dir]` (kernel `as_fifo_expired`):
    /// many expired requests must not become a seek storm.
    fn fifo_expired(&mut self, dir: usize, now: Instant) -> bool {
        if now.since(self.last_check_fifo[dir]) < self.fifo_expire[dir] {
            return false;
        }
        self.last_check_fifo[dir] = now;
        match self.dirs[dir].fifo_head() {
            Some((deadline, _)) => now > deadline,
            None => false,
        }
    }

    /// Tune `write_batch_count` from how long the last write batch took
    /// against its target (kernel `update_write_batch`).
    fn update_write_batch(&mut self, now: Instant) {
        let batch = self.batch_expire[ASYNC];
        // current_batch_expires still holds the write batch's start + batch.
        let write_time = (now + batch).since(self.current_batch_expires);
        let count = &mut self.write_batch_count;
        if write_time > batch && !self.write_batch_idled {
            if write_time > batch.mul(3) {
                *count /= 2;
            } else {
                *count = count.saturating_sub(1);
            }
        } else if write_time < batch && self.current_write_count == 0 {
            if batch > write_time.mul(3) {
                *count = count.saturating_mul(2);
            } else {
                *count += 1;
            }
        }
        *count = (*count).max(1);
    }

    /// Take `id` off the queues and hand it out (kernel `as_move_to_dispatch`).
    fn move_to_dispatch(&mut self, dir: usize, id: RequestId) -> Request {
        self.antic_stop();
        self.antic_status = AnticStatus::Off;
        let (end, task) = {
            let r = self.dirs[dir].sorted.get(id).expect("queued");
            (r.end(), r.task)
        };
        // Set before find_next, which measures from it.
        self.last_sector[dir] = end;
        let previous = self.antic_task;
        if dir == SYNC {
            self.antic_task = Some(task);
        } else {
            self.antic_task = None;
            self.current_write_count = self.current_write_count.saturating_sub(1);
        }
        self.ioc_finished = false;
        self.next_rq[dir] = self.find_next(dir, id);

        let d = &mut self.dirs[dir];
        let (deadline, owner) = d.meta.remove(&id).expect("queued request has a deadline");
        d.fifo.remove(&(deadline, id));
        let request = d.sorted.remove(id).expect("queued");
        debug_assert_eq!(owner, task);
        let aic = self
            .tasks
            .get_mut(&task)
            .expect("queued request's task is known");
        aic.nr_queued -= 1;
        aic.in_flight += 1;
        self.nr_dispatched += 1;
        if let Some(previous) = previous.filter(|&p| p != task) {
            self.maybe_forget(previous);
        }
        debug_assert_eq!(self.next_rq[dir].is_some(), !self.dirs[dir].is_empty());
        request
    }

    /// Queue a request that did not merge (kernel `as_add_request` and
    /// `as_update_rq`).
    fn add_request(&mut self, request: Request, now: Instant) {
        let dir = dir_of(&request);
        let rq = Candidate::of(&request);
        let aic = self.tasks.entry(request.task).or_insert_with(TaskIo::new);
        if !aic.running {
            // A task id that exited and came back is a new io_context; its
            // requests still here keep being counted.
            *aic = TaskIo {
                nr_queued: aic.nr_queued,
                in_flight: aic.in_flight,
                ..TaskIo::new()
            };
        }
        self.update_iohist(rq.task, &rq, now);
        self.tasks
            .get_mut(&rq.task)
            .expect("just inserted")
            .nr_queued += 1;

        let id = request.id;
        let deadline = now + self.fifo_expire[dir];
        let d = &mut self.dirs[dir];
        d.fifo.insert((deadline, id));
        d.meta.insert(id, (deadline, rq.task));
        d.sorted.insert(request);

        self.next_rq[dir] = self.choose_req(dir, Some(id), self.next_rq[dir]);
        if matches!(
            self.antic_status,
            AnticStatus::WaitReq | AnticStatus::WaitNext
        ) && self.can_break_anticipation(Some(&rq), now)
        {
            self.antic_end = if Some(rq.task) == self.antic_task {
                "anticipation hit"
            } else {
                "anticipation broken by another task"
            };
            self.antic_stop();
        }
    }

    /// A queued request `gone` was absorbed into `survivor` by a merge
    /// (kernel `as_merged_requests`).
    fn merged_requests(&mut self, dir: usize, survivor: RequestId, gone: RequestId) {
        let d = &mut self.dirs[dir];
        let (gone_deadline, gone_task) = d.meta.remove(&gone).expect("queued");
        d.fifo.remove(&(gone_deadline, gone));
        let (mine, owner) = d.meta[&survivor];
        if gone_deadline < mine {
            d.fifo.remove(&(mine, survivor));
            d.fifo.insert((gone_deadline, survivor));
            d.meta.insert(survivor, (gone_deadline, owner));
        }
        if self.next_rq[dir] == Some(gone) {
            self.next_rq[dir] = Some(survivor);
        }
        if let Some(t) = self.tasks.get_mut(&gone_task) {
            t.nr_queued -= 1;
        }
        self.maybe_forget(gone_task);
    }
}

impl Scheduler for Anticipatory {
    fn name(&self) -> &'static str {
        "anticipatory"
    }

    fn insert(&mut self, request: Request, now: Instant) {
        self.tick(now);
        let dir = dir_of(&request);
        match self.dirs[dir].sorted.merge(request, &self.rule) {
            MergeOutcome::None(request) => self.add_request(request, now),
            // A merged request never reaches the scheduler proper: no
            // statistics, no anticipation check (as in the kernel).
            MergeOutcome::Merged {
                survivor,
                absorbed_queued,
            } => {
                if let Some(gone) = absorbed_queued {
                    self.merged_requests(dir, survivor, gone);
                }
            }
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.tick(now);
        let reads = !self.dirs[SYNC].is_empty();
        let writes = !self.dirs[ASYNC].is_empty();

        // A write batch that ran out of work cannot be timed.
        if self.batch_dir == ASYNC && !reads && (self.current_write_count == 0 || !writes) {
            self.write_batch_idled = true;
        }
        if !(reads || writes) {
            return Dispatch::Empty;
        }
        if matches!(
            self.antic_status,
            AnticStatus::WaitReq | AnticStatus::WaitNext
        ) {
            self.reason = "anticipating";
            return self.antic_wait_answer();
        }
        if self.changed_batch {
            // The old batch is still on the device; its last completion
            // starts the new one.
            debug_assert!(self.nr_dispatched > 0);
            self.reason = "batch change, old batch draining";
            return Dispatch::Wait {
                until: Instant::NEVER,
            };
        }

        let mut chosen = None;
        let mut fifo_due = false;
        if !(reads && writes && self.batch_expired(now)) {
            // The batch runs on (or one direction is empty).
            let next = self.next_rq[self.batch_dir];
            if self.batch_dir == SYNC && self.antic_expire > Duration::ZERO {
                if self.fifo_expired(SYNC, now) {
                    fifo_due = true;
                } else if self.can_anticipate(next, now) {
                    self.antic_wait();
                    self.reason = "anticipation starts";
                    return self.antic_wait_answer();
                }
            }
            if !fifo_due && next.is_some() {
                if reads && !writes {
                    self.current_batch_expires = now + self.batch_expire[SYNC];
                }
                chosen = next;
                self.reason = "batch continue";
            }
        }

        if chosen.is_none() && !fifo_due {
            // Start a new batch: writes after a read batch if any wait,
            // else reads from the oldest one.
            if reads && !(writes && self.batch_dir == SYNC) {
                if self.batch_dir == ASYNC {
                    debug_assert!(!self.new_batch);
                    self.changed_batch = true;
                }
                self.batch_dir = SYNC;
            } else {
                if self.batch_dir == SYNC {
                    self.changed_batch = true;
                    // A read batch whose first read has not completed yet.
                    self.new_batch = false;
                }
                self.batch_dir = ASYNC;
                self.current_write_count = self.write_batch_count;
                self.write_batch_idled = false;
            }
            chosen = self.dirs[self.batch_dir].fifo_head().map(|(_, id)| id);
            self.last_check_fifo[self.batch_dir] = now;
            self.reason = if self.batch_dir == SYNC {
                "read batch start, fifo head"
            } else {
                "write batch start, fifo head"
            };
        }

        // An expired request is served first.
        let dir = self.batch_dir;
        if fifo_due || self.fifo_expired(dir, now) {
            chosen = self.dirs[dir].fifo_head().map(|(_, id)| id);
            self.reason = "expired fifo";
        }
        let id = chosen.expect("the batch direction has requests");

        if self.changed_batch {
            debug_assert!(!self.new_batch);
            if self.nr_dispatched > 0 {
                self.reason = "batch change, old batch draining";
                return Dispatch::Wait {
                    until: Instant::NEVER,
                };
            }
            if dir == ASYNC {
                self.current_batch_expires = now + self.batch_expire[ASYNC];
            } else {
                self.new_batch = true;
            }
            self.changed_batch = false;
        }
        // The first dispatch after anticipation ended says how it ended.
        if !self.antic_end.is_empty() {
            if self.reason == "batch continue" {
                self.reason = self.antic_end;
            }
            self.antic_end = "";
        }
        Dispatch::Request(self.move_to_dispatch(dir, id))
    }

    fn dispatch_reason(&self) -> Option<&'static str> {
        Some(self.reason)
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        self.tick(now);
        let dir = dir_of(request);
        if self.changed_batch && self.nr_dispatched == 1 {
            // The old batch drained: the new one's clock starts.
            self.current_batch_expires = now + self.batch_expire[self.batch_dir];
            self.changed_batch = false;
            if self.batch_dir == SYNC {
                self.new_batch = true;
            }
        }
        debug_assert!(self.nr_dispatched > 0, "completion without dispatch");
        self.nr_dispatched = self.nr_dispatched.saturating_sub(1);

        // A read batch is timed from its first completion.
        if self.new_batch && self.batch_dir == dir {
            self.update_write_batch(now);
            self.current_batch_expires = now + self.batch_expire[SYNC];
            self.new_batch = false;
        }

        if self.antic_task == Some(request.task) {
            self.antic_start = now;
            self.ioc_finished = true;
            if self.antic_status == AnticStatus::WaitReq {
                self.antic_status = AnticStatus::WaitNext;
            }
        }

        if let Some(aic) = self.tasks.get_mut(&request.task) {
            if dir == SYNC {
                aic.io_running = true;
                aic.last_end_request = now;
            }
            aic.in_flight = aic.in_flight.saturating_sub(1);
        }
        self.maybe_forget(request.task);
    }

    fn queued(&self) -> usize {
        self.dirs[SYNC].sorted.len() + self.dirs[ASYNC].sorted.len()
    }

    fn task_exited(&mut self, task: TaskId, now: Instant) {
        self.tick(now);
        if let Some(aic) = self.tasks.get_mut(&task) {
            aic.running = false;
        }
        if self.antic_task == Some(task) {
            self.antic_stop();
        }
        self.maybe_forget(task);
    }

    /// Per direction the sorted list, the FIFO and the owners hold the
    /// same requests and `next_rq` is one of them exactly when any is
    /// queued; anticipation is on only with a task to wait for, and a
    /// waiting-for-request state only while something is on the device.
    fn check_invariants(&self) -> Result<(), String> {
        for (dir, d) in self.dirs.iter().enumerate() {
            let n = d.sorted.len();
            if d.fifo.len() != n || d.meta.len() != n {
                return Err(format!(
                    "direction {dir}: {n} sorted, {} in the FIFO, {} owners",
                    d.fifo.len(),
                    d.meta.len()
                ));
            }
            if let Some((at, id)) = d
                .fifo
                .iter()
                .find(|(at, id)| d.meta.get(id).map(|m| m.0) != Some(*at))
            {
                return Err(format!(
                    "direction {dir}: FIFO entry {id:?} at {at} has no owner"
                ));
            }
            match self.next_rq[dir] {
                Some(id) if !d.meta.contains_key(&id) => {
                    return Err(format!("direction {dir}: next_rq {id:?} is not queued"))
                }
                None if n > 0 => return Err(format!("direction {dir}: {n} queued, no next_rq")),
                _ => {}
            }
        }
        if self.antic_status != AnticStatus::Off && self.antic_task.is_none() {
            return Err(format!(
                "anticipating ({:?}) with no task",
                self.antic_status
            ));
        }
        if self.antic_status == AnticStatus::WaitReq && self.nr_dispatched == 0 {
            return Err("waiting for a request's completion with nothing dispatched".into());
        }
        Ok(())
    }

    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        if self.queue_depth > 1 {
            return None;
        }
        let expire = self.fifo_expire[SYNC].max(self.fifo_expire[ASYNC]);
        let round = expire
            + self.batch_expire[SYNC]
            + self.batch_expire[ASYNC]
            + self.antic_expire.mul(2)
            + service.mul(4);
        Some(expire + round.mul(max_queued as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn new_as() -> Anticipatory {
        Anticipatory::new(&QueueLimits::default())
    }

    fn take(s: &mut Anticipatory, now: Instant) -> Request {
        match s.dispatch(now) {
            Dispatch::Request(r) => r,
            other => panic!("expected a request at {now}, got {other:?}"),
        }
    }

    #[test]
    fn waits_after_a_read_for_the_same_task_and_serves_it_at_once() {
        let mut s = new_as();
        s.insert(Request::read(1, 1, 1000, 8), at(0));
        s.insert(Request::write(2, 2, 900_000, 8), at(0));
        let r = take(&mut s, at(0));
        assert_eq!(r.id.0, 1);
        s.complete(&r, at(5));
        // The read completed, a write waits: anticipate until 5 + 6 ms.
        assert_eq!(s.dispatch(at(5)), Dispatch::Wait { until: at(11) });
        assert_eq!(s.antic_status(), AnticStatus::WaitNext);
        // The reader comes back 1 ms later, nearby: served before the write.
        s.insert(Request::read(3, 1, 1008, 8), at(6));
        assert_eq!(s.antic_status(), AnticStatus::Finished);
        assert_eq!(take(&mut s, at(6)).id.0, 3);
    }

    #[test]
    fn the_timer_ends_anticipation() {
        let mut s = new_as();
        s.insert(Request::read(1, 1, 1000, 8), at(0));
        s.insert(Request::write(2, 2, 900_000, 8), at(0));
        let r = take(&mut s, at(0));
        s.complete(&r, at(5));
        assert_eq!(s.dispatch(at(5)), Dispatch::Wait { until: at(11) });
        assert_eq!(s.dispatch(at(10)), Dispatch::Wait { until: at(11) });
        // A newcomer without history that timed out raises exit_prob.
        assert_eq!(take(&mut s, at(11)).id.0, 2);
        assert_eq!(s.est_time().exit_prob, 32);
    }

    #[test]
    fn a_far_read_of_another_task_does_not_break_anticipation_but_a_close_one_does() {
        let mut s = new_as();
        s.insert(Request::read(1, 1, 1_000_000, 8), at(0));
        let r = take(&mut s, at(0));
        s.complete(&r, at(5));
        s.insert(Request::write(2, 3, 5_000_000, 8), at(5));
        assert!(matches!(s.dispatch(at(5)), Dispatch::Wait { .. }));
        // 50 000 sectors away with the window still at 8192 << 0: wait on.
        s.insert(Request::read(3, 2, 1_050_000, 8), at(5));
        assert_eq!(s.antic_status(), AnticStatus::WaitNext);
        // 2000 sectors ahead of the head: close, dispatch.
        s.insert(Request::read(4, 2, 1_002_000, 8), at(5));
        assert_eq!(s.antic_status(), AnticStatus::Finished);
        assert_eq!(take(&mut s, at(5)).id.0, 4);
    }

    #[test]
    fn the_close_window_doubles_with_each_millisecond_of_waiting() {
        let mut s = new_as();
        s.insert(Request::read(1, 1, 1_000_000, 8), at(0));
        let r = take(&mut s, at(0));
        s.complete(&r, at(5));
        s.insert(Request::write(2, 3, 5_000_000, 8), at(5));
        assert!(matches!(s.dispatch(at(5)), Dispatch::Wait { .. }));
        // 3 ms into the wait the window is 8192 << 3 = 65536 sectors.
        s.insert(Request::read(3, 2, 1_060_000, 8), at(8));
        assert_eq!(s.antic_status(), AnticStatus::Finished);
    }

    #[test]
    fn a_task_that_thinks_too_long_is_not_waited_for() {
        let mut s = new_as();
        let mut now = 0;
        // Task 1 reads with 15 ms of think time (capped at 19 ms).
        for i in 0..20u64 {
            s.insert(Request::read(i, 1, 1000 + i * 8, 8), at(now));
            let r = take(&mut s, at(now));
            s.complete(&r, at(now + 2));
            now += 2 + 15;
        }
        let (ttime, _) = s.task_means(TaskId(1)).unwrap();
        assert!(ttime > Duration::from_millis(14), "{ttime}");
        s.insert(Request::read(100, 1, 2000, 8), at(now));
        s.insert(Request::write(101, 2, 9_000_000, 8), at(now));
        let r = take(&mut s, at(now));
        assert_eq!(r.id.0, 100);
        s.complete(&r, at(now + 2));
        // No anticipation: the write goes at once.
        assert_eq!(take(&mut s, at(now + 2)).id.0, 101);
    }

    #[test]
    fn an_exited_task_ends_the_anticipation() {
        let mut s = new_as();
        s.insert(Request::read(1, 1, 1000, 8), at(0));
        s.insert(Request::write(2, 2, 900_000, 8), at(0));
        let r = take(&mut s, at(0));
        s.complete(&r, at(5));
        assert!(matches!(s.dispatch(at(5)), Dispatch::Wait { .. }));
        s.task_exited(TaskId(1), at(6));
        assert_eq!(s.antic_status(), AnticStatus::Finished);
        assert_eq!(take(&mut s, at(6)).id.0, 2);
        // Its statistics are gone once nothing of it is left.
        assert!(!s.tasks.contains_key(&TaskId(1)));
    }

    #[test]
    fn an_async_dispatch_means_nothing_to_anticipate() {
        let mut s = new_as();
        s.insert(Request::write(1, 2, 1000, 8), at(0));
        s.insert(Request::write(2, 2, 5000, 8), at(0));
        let r = take(&mut s, at(0));
        assert_eq!(s.anticipated_task(), None);
        s.complete(&r, at(3));
        assert_eq!(take(&mut s, at(3)).id.0, 2);
    }

    #[test]
    fn backward_seeks_within_maxback_cost_twice() {
        // Head at 100_008 after the first read; a request 500 sectors ahead
        // against one `back` sectors behind, which costs twice its distance.
        for (back, winner) in [(300, 3), (200, 2)] {
            let mut s = new_as();
            s.insert(Request::read(1, 1, 100_000, 8), at(0));
            let r = take(&mut s, at(0));
            s.task_exited(TaskId(1), at(0));
            s.complete(&r, at(1));
            s.insert(Request::read(2, 2, 100_008 - back, 8), at(1));
            s.insert(Request::read(3, 3, 100_508, 8), at(1));
            s.task_exited(TaskId(2), at(1));
            s.task_exited(TaskId(3), at(1));
            assert_eq!(take(&mut s, at(1)).id.0, winner, "{back} back");
        }
    }

    #[test]
    fn choose_req_prefers_reachable_and_wraps_to_the_lowest() {
        let mut s = new_as();
        s.last_sector[SYNC] = 10 * MAXBACK;
        for (id, sector) in [
            (1, 10),
            (2, 20),
            (3, 10 * MAXBACK - 5),
            (4, 10 * MAXBACK + 7),
        ] {
            s.dirs[SYNC].sorted.insert(Request::read(id, 1, sector, 8));
        }
        let c = |s: &Anticipatory, a, b| {
            s.choose_req(SYNC, Some(RequestId(a)), Some(RequestId(b)))
                .unwrap()
                .0
        };
        // Both far behind: the lower sector.
        assert_eq!(c(&s, 2, 1), 1);
        // Reachable beats wrapped.
        assert_eq!(c(&s, 1, 3), 3);
        // 5 back costs 10 > 7 ahead.
        assert_eq!(c(&s, 3, 4), 4);
    }

    #[test]
    fn read_batch_expires_and_a_write_batch_follows() {
        use crate::harness::{
            Case, Layout, OpKind, OpMix, Options, Phase, Run, TaskScript, REGION,
        };
        // Two busy readers far apart keep a read in the system the whole
        // time (each the moment its last one completed); one async write
        // waits from time zero; the disk serves any request in 5 ms.
        let reader = |task: u32| {
            let reads = Phase::reads(u32::MAX, 8, Layout::Sequential);
            TaskScript::new(task, REGION + u64::from(task) * 10_000_000, vec![reads])
        };
        let write = Phase {
            ops: OpMix::Only(OpKind::AsyncWrite),
            ..Phase::reads(1, 8, Layout::Sequential)
        };
        let writer = TaskScript::new(9, REGION + 50_000_000, vec![write]);
        let case = Case::serial(
            vec![writer, reader(1), reader(2)],
            QueueLimits::default(),
            Duration::from_millis(5),
        );
        let mut run = Run::new(Box::new(new_as()), &case, &Options::default());
        run.run_until(at(2000)).unwrap_or_else(|v| panic!("{v}"));
        run.finish().unwrap_or_else(|v| panic!("{v}"));
        let write = run
            .stats(TaskId(9))
            .served
            .first()
            .expect("the write got a batch");
        let t = write.dispatched.since(Instant::ZERO).as_millis_f64() as u64;
        let reads = (1..=2)
            .flat_map(|task| &run.stats(TaskId(task)).served)
            .filter(|r| r.dispatched < write.dispatched)
            .count();
        println!("first write after {t} ms and {reads} reads");
        // The read batch runs read_batch_expire from its first completion.
        assert!((500..=520).contains(&t), "{t}");
    }

    #[test]
    fn write_batch_count_adapts() {
        let mut s = new_as();
        assert_eq!(s.write_batch_count(), 12);
        // Quick write batch that used all its requests: doubles.
        s.current_batch_expires = at(125);
        s.current_write_count = 0;
        s.write_batch_idled = false;
        s.update_write_batch(at(20));
        assert_eq!(s.write_batch_count(), 24);
        // Overran by more than 3x: halves.
        s.current_batch_expires = at(125);
        s.update_write_batch(at(400));
        assert_eq!(s.write_batch_count(), 12);
        // Overran a little: one less.
        s.current_batch_expires = at(125);
        s.update_write_batch(at(150));
        assert_eq!(s.write_batch_count(), 11);
        // Idled: left alone.
        s.write_batch_idled = true;
        s.current_batch_expires = at(125);
        s.update_write_batch(at(150));
        assert_eq!(s.write_batch_count(), 11);
    }

    #[test]
    fn expired_read_is_served_before_the_sweep() {
        let mut s = new_as();
        s.insert(Request::read(1, 1, 1_000_000, 8), at(0));
        let r = take(&mut s, at(0));
        s.task_exited(TaskId(1), at(0));
        s.complete(&r, at(1));
        // An old read far behind the head, then a stream ahead of it.
        s.insert(Request::read(2, 2, 10, 8), at(1));
        s.task_exited(TaskId(2), at(1));
        let mut next = 3;
        let mut now = 1;
        let mut served_at = None;
        while now < 1000 {
            s.insert(Request::read(next, 3, 1_000_000 + next * 8, 8), at(now));
            next += 1;
            let r = take(&mut s, at(now));
            now += 2;
            s.complete(&r, at(now));
            if r.id.0 == 2 {
                served_at = Some(now);
                break;
            }
        }
        let t = served_at.expect("the old read was served");
        println!("old read served after {t} ms");
        // Deadline 126 ms; the FIFO is looked at every 125 ms.
        assert!((126..=260).contains(&t), "{t}");
    }

    #[test]
    fn merges_keep_the_earlier_deadline_and_counts() {
        let mut s = new_as();
        s.insert(Request::write(1, 1, 0, 8), at(0));
        s.insert(Request::write(2, 2, 16, 8), at(1));
        s.insert(Request::write(3, 3, 8, 8), at(2));
        assert_eq!(s.queued(), 1);
        assert_eq!(s.tasks[&TaskId(2)].nr_queued, 0);
        let r = take(&mut s, at(3));
        assert_eq!((r.sector, r.sectors), (0, 24));
        assert_eq!(s.dispatch(at(3)), Dispatch::Empty);
    }

    #[test]
    fn the_bound_is_only_claimed_for_depth_one() {
        let s = new_as();
        let b = s.starvation_bound(MS.mul(10), 10).unwrap();
        assert_eq!(b, Duration::from_millis(250 + 10 * (250 + 625 + 12 + 40)));
        let deep = Anticipatory::new(&QueueLimits {
            queue_depth: 32,
            ..QueueLimits::default()
        });
        assert_eq!(deep.starvation_bound(MS, 10), None);
    }
}
