//! deadline-mc: deadline with three priority levels instead of two
//! directions.
//!
//! Corrado Zoccolo's 2009 proposal, "Reduce latencies for syncronous
//! writes and high I/O priority requests in deadline IO scheduler" (LKML,
//! 2009-04-22), never merged. Only the cover letter could be read; the
//! patch body was not found, so the design below follows the cover letter
//! and the details it leaves open are ours (marked "ours").
//!
//! # Levels
//! Each request goes to one of three levels, each with its own
//! sector-sorted list (with merging) and FIFO of deadlines:
//! 1. **RT**: reads of real-time-class tasks. Highest priority, shortest
//!    deadline (`rt_read_expire`); may starve the other levels. Ours: a
//!    queued RT read also ends a running batch of a lower level, so RT
//!    latency does not wait for a whole batch.
//! 2. **sync**: best-effort reads and the synchronous writes of RT and BE
//!    tasks (fsync, O_SYNC, O_DIRECT), deadline `sync_expire`. Classic
//!    deadline puts sync writes behind every buffered write; here they
//!    rank with reads.
//! 3. **async**: buffered (writeback) writes and every IDLE-class request,
//!    the longest deadline (`async_expire`).
//!
//! # Dispatch
//! A batch dispatches requests of one level in ascending sector order. It
//! goes on while it has a successor and either fewer than `fifo_batch`
//! requests went in it or it is younger than `time_quantum` (the cover
//! letter's minimum batch time span: cheap, sequential batches get longer,
//! seeky ones stop at `fifo_batch`). A new batch takes the RT level if it
//! has requests; otherwise the sync level, unless async requests are queued
//! and the sync level was preferred `async_starved` times in a row (the
//! classic starved counter, bounding the async level's wait behind sync).
//! The batch starts at the level's oldest request if that request's
//! deadline has passed, backed off `fifo_batch / 3` requests in sector
//! order so that requests just below the expired one are not skipped by
//! the sweep (cover letter); else it continues the level's sweep; else it
//! starts at the oldest request. On a non-rotational device a level is
//! served in FIFO (arrival) order instead: reads gain nothing from
//! sorting there (cover letter); ours: writes share the level's FIFO too.
//!
//! Merging is as in deadline, within a level: a survivor takes the earlier
//! deadline of the two it joins.
//!
//! # Tunables and where their defaults come from
//! The names follow the kernel's style; the cover letter names no values.
//! - `rt_read_expire` 125 ms: ours, HZ/8, the sync FIFO deadline that AS
//!   (`read_expire`) and CFQ (`fifo_expire_sync`) used in the same era;
//!   shorter than the sync level's, as the cover letter asks.
//! - `sync_expire` 500 ms: classic deadline's `read_expire`; sync writes
//!   get what reads always had.
//! - `async_expire` 5000 ms: classic `write_expire`.
//! - `fifo_batch` 16 and `async_starved` 2: classic `fifo_batch` and
//!   `writes_starved`; the cover letter keeps the usual counter.
//! - `time_quantum` 100 ms: ours, HZ/10, CFQ's `slice_sync` of the time:
//!   the disk time Linux then judged worth giving a sequential stream
//!   before switching.
//! - `front_merges` 1: as in deadline.
//!
//! # Invariants
//! Each queued request is in exactly one level's sorted list and FIFO;
//! `next_rq`, if set, is a queued request of `batch_level`.
//!
//! # Starvation bound
//! None: RT reads may starve both other levels for as long as they keep
//! coming. Without RT reads, once a request's deadline passes every batch
//! of its level starts at (or just below) the oldest request and the level
//! gets at least one batch in `async_starved + 1`, as in deadline, but a
//! batch's length in requests then also depends on `time_quantum`, and
//! the trait cannot say "without RT reads".

use crate::queue::MergeOutcome;
use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, SortedQueue, Tunable, Tunables};
use elevator_core::{Duration, Instant, IoClass, Op, QueueLimits, Request, RequestId};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// RT reads expire after 125 ms (ours: HZ/8, AS read_expire, CFQ fifo_expire_sync).
pub const RT_READ_EXPIRE_MS: i64 = 125;
/// Sync requests expire after 500 ms (classic deadline read_expire).
pub const SYNC_EXPIRE_MS: i64 = 500;
/// Async requests expire after 5 s (classic deadline write_expire).
pub const ASYNC_EXPIRE_MS: i64 = 5000;
/// Requests per batch before the time quantum decides (classic fifo_batch).
pub const FIFO_BATCH: i64 = 16;
/// A batch younger than 100 ms goes on past fifo_batch (ours: HZ/10, CFQ slice_sync).
pub const TIME_QUANTUM_MS: i64 = 100;
/// Sync batches allowed before a pending async batch (classic writes_starved).
pub const ASYNC_STARVED: i64 = 2;
/// Front merges are looked up by default (as in deadline).
pub const FRONT_MERGES: i64 = 1;

pub const TYPE: SchedulerType = SchedulerType {
    name: "deadline-mc",
    aliases: &["deadline-multiclass"],
    about: "deadline with RT-read, sync and async levels and a batch time quantum (Zoccolo 2009)",
    honours: &["ioprio-class"],
    tunables: &[
        Tunable {
            name: "rt_read_expire",
            default: RT_READ_EXPIRE_MS,
            unit: "ms",
            about: "deadline of a real-time-class read",
        },
        Tunable {
            name: "sync_expire",
            default: SYNC_EXPIRE_MS,
            unit: "ms",
            about: "deadline of a best-effort read or a sync write",
        },
        Tunable {
            name: "async_expire",
            default: ASYNC_EXPIRE_MS,
            unit: "ms",
            about: "deadline of a buffered write or an idle-class request",
        },
        Tunable {
            name: "fifo_batch",
            default: FIFO_BATCH,
            unit: "requests",
            about: "requests per batch once the time quantum has passed",
        },
        Tunable {
            name: "time_quantum",
            default: TIME_QUANTUM_MS,
            unit: "ms",
            about: "minimum time span of a batch",
        },
        Tunable {
            name: "async_starved",
            default: ASYNC_STARVED,
            unit: "batches",
            about: "sync batches allowed before a pending async batch",
        },
        Tunable {
            name: "front_merges",
            default: FRONT_MERGES,
            unit: "bool",
            about: "try front merges as well as back merges",
        },
    ],
    build: |t, limits| Box::new(DeadlineMc::from_tunables(t, limits)),
};

/// Real-time reads.
pub const RT: usize = 0;
/// Best-effort reads and sync writes.
pub const SYNC: usize = 1;
/// Buffered writes and idle-class requests.
pub const ASYNC: usize = 2;

/// The level a request belongs to.
pub fn level_of(r: &Request) -> usize {
    match r.prio.effective_class() {
        IoClass::Idle => ASYNC,
        IoClass::RealTime if r.op == Op::Read => RT,
        _ if r.op == Op::Read || r.sync => SYNC,
        _ => ASYNC,
    }
}

/// One level's queues.
#[derive(Debug, Default)]
struct Level {
    sorted: SortedQueue,
    /// (deadline, id), earliest first.
    fifo: BTreeSet<(Instant, RequestId)>,
    deadline: FxHashMap<RequestId, Instant>,
}

impl Level {
    fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    fn fifo_head(&self) -> Option<(Instant, RequestId)> {
        self.fifo.iter().next().copied()
    }

    fn take(&mut self, id: RequestId) -> Request {
        let d = self
            .deadline
            .remove(&id)
            .expect("queued request has a deadline");
        self.fifo.remove(&(d, id));
        self.sorted.remove(id).expect("queued")
    }
}

/// The deadline-mc policy.
#[derive(Debug)]
pub struct DeadlineMc {
    levels: [Level; 3],
    expire: [Duration; 3],
    fifo_batch: u32,
    time_quantum: Duration,
    async_starved: u32,
    rotational: bool,
    rule: MergeRule,
    /// The level of the running batch.
    batch_level: Option<usize>,
    /// Sector-order successor of the last dispatch, in `batch_level`.
    next_rq: Option<RequestId>,
    batching: u32,
    batch_start: Instant,
    starved: u32,
}

impl DeadlineMc {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        let ms = |name: &str| Duration::from_millis(t.get(name) as u64);
        DeadlineMc {
            levels: Default::default(),
            expire: [ms("rt_read_expire"), ms("sync_expire"), ms("async_expire")],
            fifo_batch: t.get("fifo_batch").max(1) as u32,
            time_quantum: ms("time_quantum"),
            async_starved: t.get("async_starved") as u32,
            rotational: limits.rotational,
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: t.get("front_merges") != 0,
                same_task: false,
            },
            batch_level: None,
            next_rq: None,
            batching: 0,
            batch_start: Instant::ZERO,
            starved: 0,
        }
    }

    /// With the defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        DeadlineMc::from_tunables(&t, limits)
    }

    /// Where the running batch goes on, if anywhere.
    fn batch_next(&self, level: usize) -> Option<RequestId> {
        if self.rotational {
            self.next_rq
                .filter(|id| self.levels[level].sorted.contains(*id))
        } else {
            self.levels[level].fifo_head().map(|(_, id)| id)
        }
    }

    /// Dispatch `id` of `level` and remember where the sweep goes on.
    fn move_request(&mut self, level: usize, id: RequestId) -> Request {
        self.next_rq = self.levels[level].sorted.next_after(id);
        self.batching += 1;
        self.levels[level].take(id)
    }

    /// The request `n` places below `id` in sector order (or the lowest).
    fn back_off(&self, level: usize, id: RequestId, n: u32) -> RequestId {
        let sorted = &self.levels[level].sorted;
        let mut at = id;
        for _ in 0..n {
            match sorted.prev_before(at) {
                Some(prev) => at = prev,
                None => break,
            }
        }
        at
    }

    /// The level of the next batch (RT, then sync unless async starved).
    fn choose_level(&mut self) -> Option<usize> {
        let has = |l: usize| !self.levels[l].is_empty();
        if has(RT) {
            return Some(RT);
        }
        if has(SYNC) {
            if !has(ASYNC) {
                return Some(SYNC);
            }
            if self.starved < self.async_starved {
                self.starved += 1;
                return Some(SYNC);
            }
        }
        if has(ASYNC) {
            self.starved = 0;
            return Some(ASYNC);
        }
        None
    }
}

impl Scheduler for DeadlineMc {
    fn name(&self) -> &'static str {
        "deadline-mc"
    }

    fn insert(&mut self, request: Request, now: Instant) {
        let level = level_of(&request);
        let l = &mut self.levels[level];
        match l.sorted.merge(request, &self.rule) {
            MergeOutcome::None(request) => {
                let deadline = now + self.expire[level];
                l.fifo.insert((deadline, request.id));
                l.deadline.insert(request.id, deadline);
                l.sorted.insert(request);
            }
            MergeOutcome::Merged {
                survivor,
                absorbed_queued,
            } => {
                if let Some(gone) = absorbed_queued {
                    let gone_deadline = l.deadline.remove(&gone).expect("queued");
                    l.fifo.remove(&(gone_deadline, gone));
                    let mine = l.deadline[&survivor];
                    if gone_deadline < mine {
                        l.fifo.remove(&(mine, survivor));
                        l.fifo.insert((gone_deadline, survivor));
                        l.deadline.insert(survivor, gone_deadline);
                    }
                    if self.next_rq == Some(gone) {
                        self.next_rq = Some(survivor);
                    }
                }
            }
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        // 1. Continue the running batch, unless RT reads wait behind it.
        if let Some(level) = self.batch_level {
            let preempted = level != RT && !self.levels[RT].is_empty();
            let in_quantum = now < self.batch_start + self.time_quantum;
            if !preempted && (self.batching < self.fifo_batch || in_quantum) {
                if let Some(id) = self.batch_next(level) {
                    return Dispatch::Request(self.move_request(level, id));
                }
            }
        }

        // 2. Choose the level of a new batch.
        let Some(level) = self.choose_level() else {
            return Dispatch::Empty;
        };

        // 3. Start at the oldest request if it expired (backed off in
        //    sector order), else go on with the level's sweep, else oldest.
        let (deadline, oldest) = self.levels[level].fifo_head().expect("level has requests");
        let sweep = if self.batch_level == Some(level) && self.rotational {
            self.batch_next(level)
        } else {
            None
        };
        let id = if deadline <= now {
            if self.rotational {
                self.back_off(level, oldest, self.fifo_batch / 3)
            } else {
                oldest
            }
        } else {
            sweep.unwrap_or(oldest)
        };
        self.batch_level = Some(level);
        self.batching = 0;
        self.batch_start = now;
        Dispatch::Request(self.move_request(level, id))
    }

    fn complete(&mut self, _request: &Request, _now: Instant) {}

    fn queued(&self) -> usize {
        self.levels.iter().map(|l| l.sorted.len()).sum()
    }

    /// None: RT reads may starve the other levels indefinitely.
    fn starvation_bound(&self, _service: Duration, _max_queued: usize) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use elevator_core::IoPrio;

    fn with(overrides: &[(&str, i64)], limits: &QueueLimits) -> DeadlineMc {
        let t = TYPE.tunables(overrides.iter().copied()).unwrap();
        DeadlineMc::from_tunables(&t, limits)
    }

    fn rt_read(id: u64, sector: u64) -> Request {
        Request {
            prio: IoPrio::rt(4),
            ..Request::read(id, 1, sector, 8)
        }
    }

    fn sync_write(id: u64, sector: u64) -> Request {
        Request {
            sync: true,
            ..Request::write(id, 2, sector, 8)
        }
    }

    fn drain(s: &mut DeadlineMc, now: Instant) -> Vec<u64> {
        let mut out = Vec::new();
        while let Dispatch::Request(r) = s.dispatch(now) {
            out.push(r.id.0);
        }
        out
    }

    #[test]
    fn requests_go_to_their_levels() {
        assert_eq!(level_of(&rt_read(1, 0)), RT);
        assert_eq!(level_of(&Request::read(1, 1, 0, 8)), SYNC);
        assert_eq!(level_of(&sync_write(1, 0)), SYNC);
        let rt_sync_write = Request {
            prio: IoPrio::rt(0),
            ..sync_write(1, 0)
        };
        assert_eq!(level_of(&rt_sync_write), SYNC);
        assert_eq!(level_of(&Request::write(1, 1, 0, 8)), ASYNC);
        let idle_read = Request {
            prio: IoPrio::idle(),
            ..Request::read(1, 1, 0, 8)
        };
        assert_eq!(level_of(&idle_read), ASYNC);
    }

    #[test]
    fn rt_reads_cut_a_lower_batch_short() {
        let mut s = DeadlineMc::new(&QueueLimits::default());
        for i in 0..10 {
            s.insert(
                Request::write(100 + i, 3, 1_000 + i * 1_000, 8),
                Instant::ZERO,
            );
        }
        let t = Instant::ZERO;
        assert_eq!(
            (0..3)
                .map(|_| s.dispatch(t))
                .filter(|d| matches!(d, Dispatch::Request(_)))
                .count(),
            3
        );
        s.insert(rt_read(1, 500_000), t);
        assert!(matches!(s.dispatch(t), Dispatch::Request(r) if r.id.0 == 1));
        // The async level resumes afterwards.
        assert!(matches!(s.dispatch(t), Dispatch::Request(r) if r.id.0 >= 100));
    }

    #[test]
    fn two_sync_batches_then_one_async_batch() {
        let limits = QueueLimits::default();
        let mut s = with(&[("fifo_batch", 1), ("time_quantum", 0)], &limits);
        for i in 0..6u64 {
            s.insert(Request::read(i, 1, i * 1000, 8), Instant::ZERO);
            s.insert(Request::write(100 + i, 2, i * 1000 + 500, 8), Instant::ZERO);
        }
        let order: String = (0..9)
            .map(|_| match s.dispatch(Instant::ZERO) {
                Dispatch::Request(r) if r.is_read() => 'S',
                Dispatch::Request(_) => 'A',
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(order, "SSASSASSA");
    }

    #[test]
    fn sync_writes_are_not_stuck_behind_buffered_writes() {
        let limits = QueueLimits::default();
        let mut s = with(&[("fifo_batch", 4), ("time_quantum", 0)], &limits);
        for i in 0..40 {
            s.insert(Request::write(100 + i, 3, i * 100, 8), Instant::ZERO);
        }
        let first = s.dispatch(Instant::ZERO);
        assert!(matches!(first, Dispatch::Request(ref r) if !r.sync));
        s.insert(sync_write(1, 1_000_000), Instant(1));
        let order = drain(&mut s, Instant(1));
        let pos = order.iter().position(|&id| id == 1).unwrap();
        // Served right after the running async batch of 4.
        assert_eq!(pos, 3, "{order:?}");
    }

    #[test]
    fn an_expired_batch_starts_a_third_of_a_batch_below_the_expired_request() {
        let limits = QueueLimits::default();
        let mut s = with(&[("fifo_batch", 9), ("time_quantum", 0)], &limits);
        // The oldest read sits in the middle of the sectors.
        s.insert(Request::read(1, 1, 50_000, 8), Instant::ZERO);
        let t1 = Instant::ZERO + Duration::from_millis(10);
        for (i, sector) in [10_000u64, 20_000, 30_000, 40_000, 60_000, 70_000]
            .iter()
            .enumerate()
        {
            s.insert(Request::read(10 + i as u64, 2, *sector, 8), t1);
        }
        let late = Instant::ZERO + Duration::from_millis(600);
        let order = drain(&mut s, late);
        // 9/3 = 3 requests below the expired one: 20_000, 30_000, 40_000, then 1.
        assert_eq!(order[..4], [11, 12, 13, 1], "{order:?}");
    }

    #[test]
    fn the_time_quantum_extends_a_cheap_batch() {
        let limits = QueueLimits::default();
        let pattern = |quantum: i64| -> String {
            let mut s = with(&[("fifo_batch", 2), ("time_quantum", quantum)], &limits);
            for i in 0..6 {
                s.insert(Request::read(i, 1, i * 16, 8), Instant::ZERO);
                s.insert(
                    Request::write(100 + i, 2, 10_000 + i * 64, 8),
                    Instant::ZERO,
                );
            }
            (0..5)
                .map(|_| match s.dispatch(Instant::ZERO) {
                    Dispatch::Request(r) if r.is_read() => 'R',
                    Dispatch::Request(_) => 'W',
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        // Without a quantum: two batches of two reads, then writes. Inside
        // the quantum the first batch sweeps on past fifo_batch.
        assert_eq!(pattern(0), "RRRRW");
        assert_eq!(pattern(100), "RRRRR");
    }

    #[test]
    fn flash_serves_a_level_in_arrival_order() {
        let limits = QueueLimits {
            rotational: false,
            ..QueueLimits::default()
        };
        let mut s = DeadlineMc::new(&limits);
        for (i, sector) in [900u64, 100, 500, 300].iter().enumerate() {
            s.insert(
                Request::read(i as u64, 1, *sector * 1_000, 8),
                Instant(i as u64),
            );
        }
        assert_eq!(drain(&mut s, Instant(10)), vec![0, 1, 2, 3]);
        let mut s = DeadlineMc::new(&QueueLimits::default());
        for (i, sector) in [900u64, 100, 500, 300].iter().enumerate() {
            s.insert(
                Request::read(i as u64, 1, *sector * 1_000, 8),
                Instant(i as u64),
            );
        }
        assert_eq!(drain(&mut s, Instant(10)), vec![0, 1, 3, 2]);
    }

    #[test]
    fn merges_keep_the_earlier_deadline() {
        let mut s = DeadlineMc::new(&QueueLimits::default());
        s.insert(Request::read(1, 1, 0, 8), Instant::ZERO);
        s.insert(Request::read(2, 1, 16, 8), Instant(5));
        s.insert(Request::read(3, 1, 8, 8), Instant(7));
        assert_eq!(s.queued(), 1);
        let Dispatch::Request(r) = s.dispatch(Instant(7)) else {
            panic!()
        };
        assert_eq!((r.sector, r.sectors), (0, 24));
        assert_eq!(s.dispatch(Instant(8)), Dispatch::Empty);
    }
}
