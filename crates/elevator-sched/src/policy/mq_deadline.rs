//! mq-deadline: deadline's batches and FIFOs once per I/O priority class.
//!
//! The blk-mq deadline scheduler as of Linux 5.14 (block/mq-deadline.c,
//! Bart Van Assche's I/O priority support, 2021), the default for SATA
//! disks and SSDs today. Each of three priority levels, RT, BE and IDLE
//! (class NONE counts as BE, the level inside a class is ignored), holds
//! what classic `deadline` holds: per direction a sector-sorted queue and a
//! FIFO by deadline, and the sector-order successor of its last dispatch
//! (5.14's per-priority `next_rq`). `batching`, `starved` and the direction
//! of the last batch are shared by the levels.
//!
//! Dispatch (`dd_dispatch_request`):
//! 1. Aging: if two or more levels have requests queued, try BE, then IDLE,
//!    with the classic step restricted to requests that arrived at least
//!    `prio_aging_expire` ago, so a lower class is not starved for ever.
//! 2. Otherwise try RT, BE, IDLE in order with the classic step, stopping
//!    at the first level that yields a request *or has any queued*: a
//!    higher level with requests blocks the lower ones.
//!
//! The classic step (`__dd_dispatch_request`) is `deadline`'s: continue the
//! batch in the level while it is shorter than `fifo_batch`, else choose a
//! direction (reads, unless writes waited `writes_starved` read batches),
//! and start at the FIFO head if it expired or the sweep has nowhere to go.
//! A request found too young for the aging pass is not dispatched, but the
//! choice's side effects (`starved`) stand, as in the kernel.
//!
//! `async_depth`: the kernel gives every allocation other than a sync read
//! a shallow tag depth (`dd_limit_depth`), so writes cannot take every
//! scheduler tag. Here tags are the engine's request slots, so the limit is
//! applied where it bites, on writes held by the device: no write is
//! dispatched while `async_depth` are in flight. The default (0) is the
//! kernel's, `nr_requests`, which blk-mq sets to twice the device's queue
//! depth (at most 2 × 128), more than the device holds: the limit binds
//! only when set lower.
//!
//! Merges stay inside a level, so a request is served at its own class.
//!
//! Invariants: each queued request is in exactly one level and direction
//! (the `deadline` queues' own invariants hold in each); writes in flight
//! never exceed `async_depth` once it binds.
//!
//! Starvation bound: an RT flood starves BE and IDLE only until their
//! requests are `prio_aging_expire` old; from then on the aging pass serves
//! them before everything but the running batch, with `deadline`'s bound per
//! level. So a request waits at most `prio_aging_expire + expire +
//! 3 × ((max_queued + 1)(writes_starved + 1) + 1) × fifo_batch` service times.

use crate::policy::deadline::Direction;
use crate::queue::{Place, PlacedMerge};
use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, Tunable, Tunables};
use elevator_core::{Duration, Instant, IoClass, Op, QueueLimits, Request};

pub use crate::policy::deadline::{
    FIFO_BATCH, FRONT_MERGES, READ_EXPIRE_MS, WRITES_STARVED, WRITE_EXPIRE_MS,
};

/// Lower-class requests older than 10 s bypass priority
/// (`prio_aging_expire`, 10 * HZ, block/mq-deadline.c since 5.14).
pub const PRIO_AGING_EXPIRE_MS: i64 = 10_000;
/// 0: the kernel's default `async_depth`, `nr_requests`
/// (`dd_depth_updated`); see the module docs.
pub const ASYNC_DEPTH: i64 = 0;
/// blk-mq's scheduler tags: `nr_requests = 2 * min(queue_depth,
/// BLKDEV_DEFAULT_RQ)` with `BLKDEV_DEFAULT_RQ` 128 (block/blk-mq-sched.c).
const BLKDEV_DEFAULT_RQ: u32 = 128;

pub const TYPE: SchedulerType = SchedulerType {
    name: "mq-deadline",
    aliases: &[],
    about: "deadline per I/O class RT/BE/IDLE with aging (Linux 5.14+ mq-deadline)",
    honours: &["ioprio class"],
    tunables: &[
        Tunable {
            name: "read_expire",
            default: READ_EXPIRE_MS,
            unit: "ms",
            about: "deadline of a read after its arrival",
        },
        Tunable {
            name: "write_expire",
            default: WRITE_EXPIRE_MS,
            unit: "ms",
            about: "deadline of a write after its arrival",
        },
        Tunable {
            name: "fifo_batch",
            default: FIFO_BATCH,
            unit: "requests",
            about: "requests per sector-ordered batch",
        },
        Tunable {
            name: "writes_starved",
            default: WRITES_STARVED,
            unit: "batches",
            about: "read batches allowed before a pending write batch",
        },
        Tunable {
            name: "front_merges",
            default: FRONT_MERGES,
            unit: "bool",
            about: "try front merges as well as back merges",
        },
        Tunable {
            name: "prio_aging_expire",
            default: PRIO_AGING_EXPIRE_MS,
            unit: "ms",
            about: "a lower-class request this old is served before higher classes",
        },
        Tunable {
            name: "async_depth",
            default: ASYNC_DEPTH,
            unit: "requests",
            about: "most writes in flight (0: nr_requests, twice the device depth)",
        },
    ],
    build: |t, limits| Box::new(MqDeadline::from_tunables(t, limits)),
};

const READ: usize = 0;
const WRITE: usize = 1;
/// Priority levels, highest first (`enum dd_prio`).
const RT: usize = 0;
const BE: usize = 1;
const IDLE: usize = 2;
const LEVELS: usize = 3;

fn dir_of(r: &Request) -> usize {
    match r.op {
        Op::Read => READ,
        Op::Write | Op::Flush => WRITE,
    }
}

/// `ioprio_class_to_prio`: NONE is served as BE.
fn level_of(r: &Request) -> usize {
    match r.prio.class() {
        IoClass::RealTime => RT,
        IoClass::None | IoClass::BestEffort => BE,
        IoClass::Idle => IDLE,
    }
}

/// One priority level: `struct dd_per_prio`.
#[derive(Debug, Default)]
struct Level {
    dirs: [Direction; 2],
    /// Sector-order successor of this level's last dispatch, for the
    /// direction dispatched only.
    next_rq: [Option<Place>; 2],
}

impl Level {
    fn queued(&self) -> usize {
        self.dirs[READ].sorted.len() + self.dirs[WRITE].sorted.len()
    }

    fn live_next(&self, dir: usize) -> Option<Place> {
        self.next_rq[dir].filter(|&place| self.dirs[dir].sorted.at(place).is_some())
    }
}

/// The mq-deadline policy.
#[derive(Debug)]
pub struct MqDeadline {
    levels: [Level; LEVELS],
    expire: [Duration; 2],
    fifo_batch: u32,
    writes_starved: u32,
    prio_aging_expire: Duration,
    async_depth: usize,
    rule: MergeRule,
    batching: u32,
    starved: u32,
    last_dir: usize,
    writes_in_flight: usize,
}

impl MqDeadline {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        let nr_requests = 2 * limits.queue_depth.clamp(1, BLKDEV_DEFAULT_RQ);
        let async_depth = match t.get("async_depth") {
            0 => nr_requests as usize,
            n => n as usize,
        };
        MqDeadline {
            levels: Default::default(),
            expire: [
                Duration::from_millis(t.get("read_expire") as u64),
                Duration::from_millis(t.get("write_expire") as u64),
            ],
            fifo_batch: t.get("fifo_batch").max(1) as u32,
            writes_starved: t.get("writes_starved") as u32,
            prio_aging_expire: Duration::from_millis(t.get("prio_aging_expire") as u64),
            async_depth,
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: t.get("front_merges") != 0,
                same_task: false,
            },
            batching: 0,
            starved: 0,
            last_dir: READ,
            writes_in_flight: 0,
        }
    }

    /// With the kernel's defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        MqDeadline::from_tunables(&t, limits)
    }

    /// Whether a write may go to the device now (`async_depth`).
    fn writes_allowed(&self) -> bool {
        self.writes_in_flight < self.async_depth
    }

    /// When the request at `place` arrived, as the kernel reads it back
    /// from its FIFO time (a merge survivor keeps the earlier one).
    fn arrival(&self, level: usize, dir: usize, place: Place) -> Instant {
        let deadline = self.levels[level].dirs[dir].deadline_of(place);
        Instant(deadline.0.saturating_sub(self.expire[dir].0))
    }

    /// `__dd_dispatch_request`: the classic deadline step inside one level,
    /// dispatching only a request at least `min_age` old (the kernel's
    /// `latest_start`, `now - min_age`).
    fn dispatch_level(&mut self, level: usize, now: Instant, min_age: Duration) -> Option<Request> {
        let writes_ok = self.writes_allowed();
        let l = &self.levels[level];
        // Continue the running batch.
        let next = l.live_next(self.last_dir);
        if let Some(place) = next {
            if self.batching < self.fifo_batch && (self.last_dir == READ || writes_ok) {
                return self.take(level, self.last_dir, place, now, min_age, false);
            }
        }
        let reads = !l.dirs[READ].is_empty();
        let writes = !l.dirs[WRITE].is_empty() && writes_ok;
        let dir = if reads {
            if writes && self.starved >= self.writes_starved {
                self.starved = 0;
                WRITE
            } else {
                if writes {
                    self.starved += 1;
                }
                READ
            }
        } else if writes {
            self.starved = 0;
            WRITE
        } else {
            return None;
        };
        let l = &mut self.levels[level];
        let head = l.dirs[dir].fifo_head().expect("direction has requests");
        let place = match l.live_next(dir) {
            Some(next) if head.deadline > now => next,
            _ => head.place,
        };
        self.take(level, dir, place, now, min_age, true)
    }

    /// Dispatch the request at `place` unless it is younger than
    /// `min_age`; `new_batch` starts a batch in `dir`.
    fn take(
        &mut self,
        level: usize,
        dir: usize,
        place: Place,
        now: Instant,
        min_age: Duration,
        new_batch: bool,
    ) -> Option<Request> {
        if new_batch {
            self.last_dir = dir;
            self.batching = 0;
        }
        if self.arrival(level, dir, place) + min_age > now {
            return None;
        }
        self.batching += 1;
        let l = &mut self.levels[level];
        let (request, next) = l.dirs[dir].take(place);
        l.next_rq = [None, None];
        l.next_rq[dir] = next;
        if dir == WRITE {
            self.writes_in_flight += 1;
        }
        Some(request)
    }
}

impl Scheduler for MqDeadline {
    fn name(&self) -> &'static str {
        "mq-deadline"
    }

    fn insert(&mut self, request: Request, now: Instant) {
        let dir = dir_of(&request);
        let d = &mut self.levels[level_of(&request)].dirs[dir];
        match d.sorted.merge(request, &self.rule) {
            PlacedMerge::None(request) => d.insert(request, now + self.expire[dir]),
            PlacedMerge::Merged {
                survivor,
                absorbed_queued: Some(gone),
            } => d.inherit(survivor, gone),
            PlacedMerge::Merged { .. } => {}
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        let busy_levels = self.levels.iter().filter(|l| l.queued() > 0).count();
        if busy_levels == 0 {
            return Dispatch::Empty;
        }
        if busy_levels >= 2 {
            for level in [BE, IDLE] {
                if let Some(r) = self.dispatch_level(level, now, self.prio_aging_expire) {
                    return Dispatch::Request(r);
                }
            }
        }
        for level in [RT, BE, IDLE] {
            if let Some(r) = self.dispatch_level(level, now, Duration::ZERO) {
                return Dispatch::Request(r);
            }
            if self.levels[level].queued() > 0 {
                break;
            }
        }
        // Only writes held back by `async_depth` remain: one completes soon.
        Dispatch::Empty
    }

    fn complete(&mut self, request: &Request, _now: Instant) {
        if dir_of(request) == WRITE {
            self.writes_in_flight = self.writes_in_flight.saturating_sub(1);
        }
    }

    fn queued(&self) -> usize {
        self.levels.iter().map(Level::queued).sum()
    }

    fn check_invariants(&self) -> Result<(), String> {
        for (level, l) in self.levels.iter().enumerate() {
            for (dir, d) in l.dirs.iter().enumerate() {
                d.check(dir)?;
                if let Some(r) = d
                    .sorted
                    .iter()
                    .find(|r| level_of(r) != level || dir_of(r) != dir)
                {
                    return Err(format!("{r} queued at level {level}, direction {dir}"));
                }
            }
        }
        Ok(())
    }

    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        let expire = self.expire[READ].max(self.expire[WRITE]);
        let batches = (max_queued as u64 + 1) * (u64::from(self.writes_starved) + 1) + 1;
        let per_level = service.mul(batches * u64::from(self.fifo_batch));
        Some(self.prio_aging_expire + expire + per_level.mul(LEVELS as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use elevator_core::IoPrio;

    fn read(id: u64, sector: u64, prio: IoPrio) -> Request {
        Request {
            prio,
            ..Request::read(id, id as u32, sector, 8)
        }
    }

    fn next_id(s: &mut MqDeadline, now: Instant) -> Option<u64> {
        match s.dispatch(now) {
            Dispatch::Request(r) => Some(r.id.0),
            _ => None,
        }
    }

    #[test]
    fn rt_goes_before_be_and_be_before_idle() {
        let mut s = MqDeadline::new(&QueueLimits::default());
        s.insert(read(1, 100, IoPrio::idle()), Instant::ZERO);
        s.insert(read(2, 200, IoPrio::be(4)), Instant::ZERO);
        s.insert(read(3, 300, IoPrio::rt(7)), Instant::ZERO);
        s.insert(read(4, 400, IoPrio::default()), Instant::ZERO);
        let order: Vec<u64> = std::iter::from_fn(|| next_id(&mut s, Instant(1))).collect();
        assert_eq!(order, vec![3, 2, 4, 1]);
    }

    #[test]
    fn an_idle_request_older_than_prio_aging_expire_passes_a_be_flood() {
        let mut s = MqDeadline::new(&QueueLimits::default());
        s.insert(read(1, 0, IoPrio::idle()), Instant::ZERO);
        let mut now = Instant::ZERO;
        let mut id = 10;
        // A BE flood: one new BE read per dispatch, far from each other.
        let served_at = loop {
            id += 1;
            s.insert(read(id, id * 1000, IoPrio::be(4)), now);
            match next_id(&mut s, now) {
                Some(1) => break now,
                Some(_) => {}
                None => panic!("nothing dispatched"),
            }
            now += Duration::from_millis(10);
            assert!(
                now < Instant::ZERO + Duration::from_secs(20),
                "IDLE starved"
            );
        };
        let waited = served_at.since(Instant::ZERO);
        assert!(
            waited >= Duration::from_millis(PRIO_AGING_EXPIRE_MS as u64),
            "served early: {waited}"
        );
        assert!(
            waited < Duration::from_millis(10_100),
            "served late: {waited}"
        );
    }

    #[test]
    fn async_depth_caps_writes_in_flight_but_not_reads() {
        let t = TYPE.tunables([("async_depth", 2)]).unwrap();
        let mut s = MqDeadline::from_tunables(&t, &QueueLimits::default());
        for i in 0..6u64 {
            s.insert(Request::write(i, 1, i * 1000, 8), Instant::ZERO);
        }
        let first = s.dispatch(Instant::ZERO);
        let Dispatch::Request(w1) = first else {
            panic!("{first:?}")
        };
        assert!(matches!(s.dispatch(Instant::ZERO), Dispatch::Request(_)));
        assert_eq!(
            s.dispatch(Instant::ZERO),
            Dispatch::Empty,
            "two writes in flight"
        );
        s.insert(Request::read(100, 2, 50, 8), Instant::ZERO);
        assert_eq!(next_id(&mut s, Instant::ZERO), Some(100), "reads unlimited");
        s.complete(&w1, Instant(5));
        assert!(matches!(s.dispatch(Instant(5)), Dispatch::Request(r) if !r.is_read()));
    }

    #[test]
    fn levels_do_not_merge_with_each_other() {
        let mut s = MqDeadline::new(&QueueLimits::default());
        s.insert(read(1, 0, IoPrio::be(4)), Instant::ZERO);
        s.insert(read(2, 8, IoPrio::rt(0)), Instant::ZERO);
        s.insert(read(3, 16, IoPrio::be(0)), Instant::ZERO);
        assert_eq!(s.queued(), 3, "2 joins neither: it is RT, they are BE");
    }
}
