//! deadline: sector-sorted batches with per-direction expiry.
//!
//! The classic Linux 2.6 deadline scheduler (block/deadline-iosched.c, as of
//! 2.6.25 onwards; Documentation/block/deadline-iosched.txt). Per direction
//! (read, write) it keeps a sector-sorted tree and a FIFO ordered by
//! deadline, `arrival + read_expire` or `arrival + write_expire`.
//!
//! Dispatch:
//! 1. If a batch is running (`next_rq` set for its direction) and fewer than
//!    `fifo_batch` requests went in it, continue with the next request in
//!    ascending sector order.
//! 2. Otherwise choose a direction: reads, unless writes are queued and
//!    reads were already preferred `writes_starved` times in a row.
//! 3. Start the batch at the FIFO head if that request's deadline has
//!    passed, or if there is no sector-order successor (the last batch was
//!    in the other direction or reached the highest sector); else continue
//!    the sweep. Expiry is checked only here, when a batch starts.
//!
//! A new request is back-merged into a queued one that ends where it
//! starts, and front-merged (if `front_merges`) into one that starts where
//! it ends. A survivor takes the earlier deadline of the two it joins.
//!
//! Invariants: each queued request is in exactly one direction's tree and
//! FIFO; `next_rq` is set for at most one direction.
//!
//! Starvation bound: once a request's deadline passes, every batch of its
//! direction starts at that direction's oldest request, and its direction
//! gets at least one batch in every `writes_starved + 1`. So it waits at
//! most `expire + ((max_queued + 1)(writes_starved + 1) + 1) × fifo_batch`
//! service times.

use crate::queue::MergeOutcome;
use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, SortedQueue, Tunable, Tunables};
use elevator_core::{Duration, Instant, Op, QueueLimits, Request, RequestId, Sector};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// Reads expire after 500 ms (`read_expire`, HZ/2).
pub const READ_EXPIRE_MS: i64 = 500;
/// Writes expire after 5 s (`write_expire`, 5*HZ).
pub const WRITE_EXPIRE_MS: i64 = 5000;
/// At most 16 requests per sector-ordered batch (`fifo_batch`).
pub const FIFO_BATCH: i64 = 16;
/// Reads may be preferred over pending writes twice in a row (`writes_starved`).
pub const WRITES_STARVED: i64 = 2;
/// Front merges are looked up by default (`front_merges`).
pub const FRONT_MERGES: i64 = 1;

pub const TYPE: SchedulerType = SchedulerType {
    name: "deadline",
    aliases: &["mq-deadline"],
    about: "sector-sorted batches, read and write FIFOs with expiry (Linux 2.6 deadline)",
    honours: &[],
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
    ],
    build: |t, limits| Box::new(Deadline::from_tunables(t, limits)),
};

const READ: usize = 0;
const WRITE: usize = 1;

fn dir_of(r: &Request) -> usize {
    match r.op {
        Op::Read => READ,
        Op::Write | Op::Flush => WRITE,
    }
}

/// One direction's queues.
#[derive(Debug, Default)]
struct Direction {
    sorted: SortedQueue,
    /// (deadline, id), earliest first.
    fifo: BTreeSet<(Instant, RequestId)>,
    deadline: FxHashMap<RequestId, Instant>,
}

impl Direction {
    fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    fn fifo_head(&self) -> Option<(Instant, RequestId)> {
        self.fifo.iter().next().copied()
    }

    /// Remove a queued request; also returns its sector-order successor.
    fn take(&mut self, id: RequestId) -> (Request, Option<RequestId>) {
        let d = self
            .deadline
            .remove(&id)
            .expect("queued request has a deadline");
        self.fifo.remove(&(d, id));
        self.sorted.remove_with_next(id).expect("queued")
    }
}

/// The deadline policy.
#[derive(Debug)]
pub struct Deadline {
    dirs: [Direction; 2],
    expire: [Duration; 2],
    fifo_batch: u32,
    writes_starved: u32,
    rule: MergeRule,
    /// Sector-order successor of the last dispatch, for its direction only.
    next_rq: [Option<RequestId>; 2],
    batching: u32,
    starved: u32,
    /// End of the last dispatched request (for inspection and tests).
    last_sector: Sector,
}

impl Deadline {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        Deadline {
            dirs: Default::default(),
            expire: [
                Duration::from_millis(t.get("read_expire") as u64),
                Duration::from_millis(t.get("write_expire") as u64),
            ],
            fifo_batch: t.get("fifo_batch").max(1) as u32,
            writes_starved: t.get("writes_starved") as u32,
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: t.get("front_merges") != 0,
                same_task: false,
            },
            next_rq: [None, None],
            batching: 0,
            starved: 0,
            last_sector: 0,
        }
    }

    /// With the kernel's defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        Deadline::from_tunables(&t, limits)
    }

    /// Dispatch `id` of direction `dir` and remember where the sweep goes on.
    fn move_request(&mut self, dir: usize, id: RequestId) -> Request {
        let (request, next) = self.dirs[dir].take(id);
        self.next_rq = [None, None];
        self.next_rq[dir] = next;
        self.batching += 1;
        self.last_sector = request.end();
        request
    }

    fn live_next(&self, dir: usize) -> Option<RequestId> {
        self.next_rq[dir].filter(|id| self.dirs[dir].sorted.contains(*id))
    }
}

impl Scheduler for Deadline {
    fn name(&self) -> &'static str {
        "deadline"
    }

    fn insert(&mut self, request: Request, now: Instant) {
        let dir = dir_of(&request);
        let d = &mut self.dirs[dir];
        match d.sorted.merge(request, &self.rule) {
            MergeOutcome::None(request) => {
                let deadline = now + self.expire[dir];
                d.fifo.insert((deadline, request.id));
                d.deadline.insert(request.id, deadline);
                d.sorted.insert(request);
            }
            MergeOutcome::Merged {
                survivor,
                absorbed_queued,
            } => {
                // The survivor keeps the earlier of the two deadlines.
                if let Some(gone) = absorbed_queued {
                    let gone_deadline = d.deadline.remove(&gone).expect("queued");
                    d.fifo.remove(&(gone_deadline, gone));
                    let mine = d.deadline[&survivor];
                    if gone_deadline < mine {
                        d.fifo.remove(&(mine, survivor));
                        d.fifo.insert((gone_deadline, survivor));
                        d.deadline.insert(survivor, gone_deadline);
                    }
                }
            }
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        let reads = !self.dirs[READ].is_empty();
        let writes = !self.dirs[WRITE].is_empty();
        if !reads && !writes {
            return Dispatch::Empty;
        }

        // 1. Continue the running batch.
        if self.batching < self.fifo_batch {
            for dir in [WRITE, READ] {
                if let Some(id) = self.live_next(dir) {
                    return Dispatch::Request(self.move_request(dir, id));
                }
            }
        }

        // 2. Choose a direction.
        let dir = if reads && !(writes && self.starved >= self.writes_starved) {
            if writes {
                self.starved += 1;
            }
            READ
        } else {
            self.starved = 0;
            WRITE
        };

        // 3. Start the batch at the oldest request if it expired, or if the
        //    sweep has nowhere to go on.
        let (deadline, oldest) = self.dirs[dir].fifo_head().expect("direction has requests");
        let id = match self.live_next(dir) {
            Some(next) if deadline > now => next,
            _ => oldest,
        };
        self.batching = 0;
        Dispatch::Request(self.move_request(dir, id))
    }

    fn complete(&mut self, _request: &Request, _now: Instant) {}

    fn queued(&self) -> usize {
        self.dirs[READ].sorted.len() + self.dirs[WRITE].sorted.len()
    }

    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        let expire = self.expire[READ].max(self.expire[WRITE]);
        let batches = (max_queued as u64 + 1) * (u64::from(self.writes_starved) + 1) + 1;
        Some(expire + service.mul(batches * u64::from(self.fifo_batch)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(s: &mut Deadline, now: Instant) -> Vec<u64> {
        let mut out = Vec::new();
        while let Dispatch::Request(r) = s.dispatch(now) {
            out.push(r.id.0);
        }
        out
    }

    #[test]
    fn batches_go_up_in_sector_order() {
        let mut s = Deadline::new(&QueueLimits::default());
        for (id, sector) in [(1, 500), (2, 100), (3, 300), (4, 900)] {
            s.insert(Request::read(id, id as u32, sector, 8), Instant::ZERO);
        }
        // First batch starts at the FIFO head (no successor yet), then sweeps up.
        assert_eq!(drain(&mut s, Instant::ZERO), vec![1, 4, 2, 3]);
    }

    #[test]
    fn two_read_batches_then_one_write_batch() {
        let limits = QueueLimits::default();
        let t = TYPE.tunables([("fifo_batch", 1)]).unwrap();
        let mut s = Deadline::from_tunables(&t, &limits);
        for i in 0..6u64 {
            s.insert(Request::read(i, 1, i * 1000, 8), Instant::ZERO);
            s.insert(Request::write(100 + i, 2, i * 1000 + 500, 8), Instant::ZERO);
        }
        let order: Vec<char> = (0..9)
            .map(|_| match s.dispatch(Instant::ZERO) {
                Dispatch::Request(r) if r.is_read() => 'R',
                Dispatch::Request(_) => 'W',
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(order.iter().collect::<String>(), "RRWRRWRRW");
    }

    #[test]
    fn an_expired_request_restarts_the_batch_at_the_fifo_head() {
        let mut s = Deadline::new(&QueueLimits::default());
        s.insert(Request::read(1, 1, 10_000, 8), Instant::ZERO);
        s.insert(Request::read(2, 1, 20_000, 8), Instant::ZERO);
        let t1 = Instant::ZERO + Duration::from_millis(100);
        s.insert(Request::read(3, 2, 30_000, 8), t1);
        assert_eq!(drain(&mut s, Instant::ZERO).len(), 3);
        // A sweep positioned past an old request: the old one expires.
        s.insert(Request::read(4, 1, 100, 8), Instant::ZERO);
        s.insert(Request::read(5, 1, 50_000, 8), Instant::ZERO);
        s.insert(Request::read(6, 1, 60_000, 8), Instant::ZERO);
        let late = Instant::ZERO + Duration::from_millis(600);
        assert!(matches!(s.dispatch(late), Dispatch::Request(r) if r.id.0 == 4));
    }

    #[test]
    fn merges_keep_the_earlier_deadline() {
        let mut s = Deadline::new(&QueueLimits::default());
        s.insert(Request::read(1, 1, 0, 8), Instant::ZERO);
        s.insert(Request::read(2, 1, 8, 8), Instant(5));
        s.insert(Request::read(3, 1, 24, 8), Instant(6));
        s.insert(Request::read(4, 1, 16, 8), Instant(7));
        assert_eq!(s.queued(), 1);
        let Dispatch::Request(r) = s.dispatch(Instant(7)) else {
            panic!()
        };
        assert_eq!((r.sector, r.sectors), (0, 32));
        let mut ids: Vec<u64> = r.ids().map(|i| i.0).collect();
        ids.sort();
        assert_eq!(ids, vec![1, 2, 3, 4]);
        assert_eq!(s.dispatch(Instant(8)), Dispatch::Empty);
    }
}
