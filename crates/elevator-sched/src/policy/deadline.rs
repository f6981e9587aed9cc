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
//! `rules = 2561` runs the batching of 2.5.61 instead, the "2.5.61+hacks"
//! the 2003 benchmarks measured (drivers/block/deadline-iosched.c of
//! 2.5.61, `deadline_dispatch_requests`; one `last_sector` for both
//! directions):
//! - a batch goes on only with a request that starts where the last one
//!   ended ("end the batch on a non sequential request": `batching +=
//!   fifo_batch`);
//! - the count is reset only when a batch starts at an expired request or
//!   at the lowest sector; continuing the sweep keeps it, so once a batch
//!   has ended, every dispatch picks a direction and looks at the FIFO
//!   until one of those resets;
//! - a sweep with nowhere to go wraps to the direction's lowest sector
//!   (the one-way elevator, `deadline_find_first_drq`), not the FIFO head.
//!
//! Aaron Carroll's "deadline-iosched: allow non-sequential batching"
//! (2.6.25) gave the batching above: with only sector-contiguous batches,
//! its message says, deadline was "essentially first come first served"
//! once requests expire.
//!
//! A new request is back-merged into a queued one that ends where it
//! starts, and front-merged (if `front_merges`) into one that starts where
//! it ends. A survivor takes the earlier deadline of the two it joins.
//!
//! The FIFO is kept as the kernel keeps it, a list in deadline order: here
//! a `VecDeque` of (deadline, place) sorted by (deadline, id), the order
//! the head is taken in. A dispatched request leaves its FIFO entry behind
//! (stale: `key` no longer names it); stale entries are dropped when they
//! reach the front, and swept out when they outnumber the live ones three
//! to one. A new request normally has the latest deadline and id, so an
//! insert is a push at the back (an earlier key, from time going backwards
//! or ids arriving out of order, goes to its sorted place). A survivor that
//! inherits an earlier deadline takes over the FIFO entry of the request it
//! swallowed (the kernel's `list_move` in `deadline_merged_requests`),
//! moved past the entries of that deadline with ids between the two.
//!
//! Invariants: each queued request is in exactly one direction's queue and
//! has exactly one live FIFO entry, the one whose key its slot in `key`
//! holds; the FIFO is sorted by (deadline, id), stale entries included;
//! `next_rq` is set for at most one direction.
//!
//! Starvation bound: once a request's deadline passes, every batch of its
//! direction starts at that direction's oldest request, and its direction
//! gets at least one batch in every `writes_starved + 1`. So it waits at
//! most `expire + ((max_queued + 1)(writes_starved + 1) + 1) × fifo_batch`
//! service times.

use crate::queue::{Place, PlacedMerge, PlacedQueue};
use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, Tunable, Tunables};
use elevator_core::{Duration, Instant, Op, QueueLimits, Request, RequestId, Sector};
use std::collections::VecDeque;

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
/// Batching as of 2.6.25 (`rules`); 2561 selects 2.5.61's (module docs).
pub const RULES: i64 = 2625;
/// `rules` for 2.5.61's batching.
pub const RULES_2_5_61: i64 = 2561;

pub const TYPE: SchedulerType = SchedulerType {
    name: "deadline",
    aliases: &[],
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
        Tunable {
            name: "rules",
            default: RULES,
            unit: "version",
            about: "batching of 2.6.25 (2625) or 2.5.61 (2561: sector-contiguous batches)",
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

/// One direction's queues (shared with `mq_deadline`, which keeps one
/// pair per priority level).
#[derive(Debug, Default)]
pub(crate) struct Direction {
    pub(crate) sorted: PlacedQueue,
    /// The FIFO key (deadline, id) of the request at each slot of
    /// `sorted`, `None` for a free slot: what tells live FIFO entries
    /// from stale ones.
    key: Vec<Option<FifoKey>>,
    /// Entries sorted by (deadline, id), earliest first; some are stale.
    fifo: VecDeque<FifoEntry>,
}

type FifoKey = (Instant, RequestId);

/// A request's place in its direction's FIFO.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FifoEntry {
    pub(crate) deadline: Instant,
    pub(crate) place: Place,
}

impl FifoEntry {
    fn key(&self) -> FifoKey {
        (self.deadline, self.place.id())
    }

    /// Whether this entry still stands for a queued request: the request
    /// is there and did not inherit an earlier deadline since.
    fn is_live(&self, keys: &[Option<FifoKey>]) -> bool {
        keys[self.place.slot()] == Some(self.key())
    }
}

impl Direction {
    pub(crate) fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Queue a request that did not merge, with its deadline.
    pub(crate) fn insert(&mut self, request: Request, deadline: Instant) {
        let place = self.sorted.insert(request);
        if self.key.len() <= place.slot() {
            self.key.resize(place.slot() + 1, None);
        }
        let entry = FifoEntry { deadline, place };
        self.key[place.slot()] = Some(entry.key());
        match self.fifo.back() {
            Some(last) if last.key() > entry.key() => {
                let at = self.fifo.partition_point(|e| e.key() < entry.key());
                self.fifo.insert(at, entry);
            }
            _ => self.fifo.push_back(entry),
        }
        // Stale entries behind the head wait until the head passes them;
        // sweep them out when they outnumber the live ones three to one
        // (each sweep then pays for itself with many stale entries).
        if self.fifo.len() > 4 * self.sorted.len() + 64 {
            let keys = &self.key;
            self.fifo.retain(|e| e.is_live(keys));
        }
    }

    /// The first sector of the queued request at `place`.
    fn sector_at(&self, place: Place) -> Sector {
        self.sorted.at(place).expect("queued").sector
    }

    /// Remove the request at `place`; also returns its sector-order
    /// successor. Its FIFO entry goes stale.
    pub(crate) fn take(&mut self, place: Place) -> (Request, Option<Place>) {
        self.key[place.slot()] = None;
        self.sorted.remove_with_next(place).expect("queued")
    }

    /// After `survivor` swallowed the queued request at `gone`: keep the
    /// earlier of their deadlines.
    pub(crate) fn inherit(&mut self, survivor: Place, gone: Place) {
        let theirs = self.key[gone.slot()].take().expect("was queued");
        let mine = self.key[survivor.slot()].expect("queued");
        if theirs.0 >= mine.0 {
            return; // `gone`'s entry is stale now; the survivor's stands.
        }
        // The survivor's old entry goes stale; it takes over `gone`'s.
        let mut i = self.fifo.partition_point(|e| e.key() < theirs);
        debug_assert_eq!(self.fifo[i].place, gone, "a queued request's entry");
        let entry = FifoEntry {
            deadline: theirs.0,
            place: survivor,
        };
        self.key[survivor.slot()] = Some(entry.key());
        self.fifo[i] = entry;
        // Only entries with this same deadline lie between the old and the
        // new key: move past them to restore the (deadline, id) order.
        while i + 1 < self.fifo.len() && self.fifo[i + 1].key() < self.fifo[i].key() {
            self.fifo.swap(i, i + 1);
            i += 1;
        }
        while i > 0 && self.fifo[i - 1].key() > self.fifo[i].key() {
            self.fifo.swap(i - 1, i);
            i -= 1;
        }
    }

    /// This direction's consistency, for `Scheduler::check_invariants`:
    /// every queued request is of direction `dir` and has one key, the
    /// FIFO is in (deadline, id) order, and each queued request has exactly
    /// one live FIFO entry.
    pub(crate) fn check(&self, dir: usize) -> Result<(), String> {
        if let Some(r) = self.sorted.iter().find(|r| dir_of(r) != dir) {
            return Err(format!("{r} queued in direction {dir}"));
        }
        let keyed = self.key.iter().flatten().count();
        if keyed != self.sorted.len() {
            let n = self.sorted.len();
            return Err(format!(
                "direction {dir}: {keyed} FIFO keys for {n} queued requests"
            ));
        }
        if let Some(w) = self
            .fifo
            .iter()
            .zip(self.fifo.iter().skip(1))
            .find(|(a, b)| a.key() > b.key())
        {
            return Err(format!(
                "direction {dir}: FIFO out of order at {:?}",
                w.1.key()
            ));
        }
        let live = self.fifo.iter().filter(|e| e.is_live(&self.key)).count();
        if live != keyed {
            return Err(format!(
                "direction {dir}: {live} live FIFO entries for {keyed} keys"
            ));
        }
        Ok(())
    }

    /// The FIFO deadline of the queued request at `place`.
    pub(crate) fn deadline_of(&self, place: Place) -> Instant {
        self.key[place.slot()].expect("queued").0
    }

    /// The live entry with the earliest (deadline, id); drops stale ones
    /// in front of it.
    pub(crate) fn fifo_head(&mut self) -> Option<FifoEntry> {
        while let Some(e) = self.fifo.front() {
            if e.is_live(&self.key) {
                return Some(*e);
            }
            self.fifo.pop_front();
        }
        None
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
    next_rq: [Option<Place>; 2],
    batching: u32,
    starved: u32,
    /// End of the last dispatched request (for inspection and tests).
    last_sector: Sector,
    /// Why the last dispatch chose its request (the decision trace).
    reason: &'static str,
    /// 2.5.61's batching (`rules = 2561`).
    rules_2561: bool,
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
            reason: "",
            rules_2561: t.get("rules") < RULES,
        }
    }

    /// With the kernel's defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        Deadline::from_tunables(&t, limits)
    }

    /// Dispatch the request at `place` in direction `dir` and remember
    /// where the sweep goes on. Its FIFO entry goes stale.
    fn move_request(&mut self, dir: usize, place: Place) -> Request {
        let (request, next) = self.dirs[dir].take(place);
        self.next_rq = [None, None];
        self.next_rq[dir] = next;
        self.batching += 1;
        self.last_sector = request.end();
        request
    }

    fn live_next(&self, dir: usize) -> Option<Place> {
        self.next_rq[dir].filter(|&place| self.dirs[dir].sorted.at(place).is_some())
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
            PlacedMerge::None(request) => d.insert(request, now + self.expire[dir]),
            PlacedMerge::Merged {
                survivor,
                absorbed_queued: Some(gone),
            } => d.inherit(survivor, gone),
            PlacedMerge::Merged { .. } => {}
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        let reads = !self.dirs[READ].is_empty();
        let writes = !self.dirs[WRITE].is_empty();
        if !reads && !writes {
            return Dispatch::Empty;
        }

        // 1. Continue the running batch (2.5.61: only contiguously).
        let next = [WRITE, READ]
            .into_iter()
            .find_map(|dir| self.live_next(dir).map(|place| (dir, place)));
        if let Some((dir, place)) = next {
            if self.rules_2561 && self.dirs[dir].sector_at(place) != self.last_sector {
                self.batching = self.batching.saturating_add(self.fifo_batch);
            }
            if self.batching < self.fifo_batch {
                self.reason = "batch continue";
                return Dispatch::Request(self.move_request(dir, place));
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
        let head = self.dirs[dir].fifo_head().expect("direction has requests");
        let place = match self.live_next(dir) {
            Some(next) if head.deadline > now => {
                self.reason = "batch start, sector order";
                // 2.5.61 keeps the count: the next dispatch chooses again.
                if !self.rules_2561 {
                    self.batching = 0;
                }
                next
            }
            Some(_) => {
                self.reason = "batch start, expired fifo";
                self.batching = 0;
                head.place
            }
            None if self.rules_2561 && head.deadline > now => {
                self.reason = "batch start, lowest sector (sweep ended)";
                self.batching = 0;
                self.dirs[dir]
                    .sorted
                    .first()
                    .expect("direction has requests")
            }
            None => {
                self.reason = "batch start, fifo head (sweep ended)";
                self.batching = 0;
                head.place
            }
        };
        Dispatch::Request(self.move_request(dir, place))
    }

    fn complete(&mut self, _request: &Request, _now: Instant) {}

    fn queued(&self) -> usize {
        self.dirs[READ].sorted.len() + self.dirs[WRITE].sorted.len()
    }

    fn dispatch_reason(&self) -> Option<&'static str> {
        Some(self.reason)
    }

    fn check_invariants(&self) -> Result<(), String> {
        for (dir, d) in self.dirs.iter().enumerate() {
            d.check(dir)?;
        }
        // A stale `next_rq` (its request merged away) is allowed: it is
        // filtered where it is read. Two set at once is not.
        if self.next_rq.iter().all(Option::is_some) {
            return Err("next_rq set for both directions".into());
        }
        Ok(())
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

    /// 2.5.61 ends a batch at the first request that does not start where
    /// the last one ended and chooses the direction again (reads first);
    /// 2.6.25 sweeps on through the gap. When the sweep ends 2.5.61 goes
    /// back to the lowest sector, 2.6.25 to the oldest request.
    #[test]
    fn rules_2561_end_a_batch_at_a_gap_and_wrap_to_the_lowest_sector() {
        let order = |rules: i64| {
            let t = TYPE.tunables([("rules", rules)]).unwrap();
            let mut s = Deadline::from_tunables(&t, &QueueLimits::default());
            // Full-size writes cannot merge: 0, 256 and 512 are contiguous,
            // 2000 and 2256 lie past a gap; 3000 arrives first.
            s.insert(Request::write(9, 2, 3000, 256), Instant::ZERO);
            for (id, sector) in [(1, 0), (2, 256), (3, 512), (4, 2000), (5, 2256)] {
                s.insert(Request::write(id, 2, sector, 256), Instant(1));
            }
            let mut out = Vec::new();
            for _ in 0..7 {
                if out.len() == 2 {
                    // A read arrives once the write batch is under way.
                    s.insert(Request::read(10, 1, 90_000, 8), Instant(2));
                }
                match s.dispatch(Instant(3)) {
                    Dispatch::Request(r) => out.push(r.id.0),
                    other => panic!("{other:?}"),
                }
            }
            out
        };
        // The oldest write (3000) starts; the sweep wraps to 0: 2.6.25 at
        // the FIFO head, which is 0 as well (deadlines tie, lower id).
        assert_eq!(order(RULES), vec![9, 1, 2, 3, 4, 5, 10]);
        // 2.5.61: with no sweep under way it starts at the lowest sector
        // (0), not the oldest request; 0 -> 256 -> 512 are contiguous; 2000
        // is not, so the read goes first; then the writes start again at
        // the lowest sector, and 3000 comes last.
        assert_eq!(order(RULES_2_5_61), vec![1, 2, 3, 10, 4, 5, 9]);
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

    /// Dispatch order with `fifo_batch` 1, long after every deadline: each
    /// dispatch starts a batch at the FIFO head, so this is FIFO order.
    fn fifo_order(inserts: &[(u64, Sector, Instant)], filler: (u64, Sector)) -> Vec<u64> {
        let t = TYPE.tunables([("fifo_batch", 1)]).unwrap();
        let mut s = Deadline::from_tunables(&t, &QueueLimits::default());
        for &(id, sector, at) in inserts {
            s.insert(Request::read(id, 1, sector, 8), at);
        }
        // Fills [8, 16): back merge into the request at 0, which then
        // swallows the one at 16 and inherits its earlier deadline.
        s.insert(Request::read(filler.0, 1, filler.1, 8), Instant(50));
        drain(&mut s, Instant::ZERO + Duration::from_secs(60))
    }

    #[test]
    fn an_inherited_deadline_ties_by_id() {
        // 1 (at 16) and 2 (far away) share a deadline; 3 (at 0) comes
        // later, swallows 1 and takes its deadline: 2 then goes first, as
        // its id is lower than 3's.
        let order = fifo_order(
            &[
                (1, 16, Instant(10)),
                (2, 1000, Instant(10)),
                (3, 0, Instant(20)),
            ],
            (4, 8),
        );
        assert_eq!(order, vec![2, 3]);
        // The same with the survivor's id the lowest: it goes first.
        let order = fifo_order(
            &[
                (3, 1000, Instant(10)),
                (5, 16, Instant(10)),
                (1, 0, Instant(20)),
            ],
            (7, 8),
        );
        assert_eq!(order, vec![1, 3]);
    }

    #[test]
    fn stale_fifo_entries_are_swept_out() {
        let mut s = Deadline::new(&QueueLimits::default());
        let mut now = Instant::ZERO;
        let mut most = 0;
        for i in 0..20_000u64 {
            // Sector order is far from arrival order, so the sweep leaves
            // stale entries behind the FIFO head.
            s.insert(Request::read(i, 1, (i * 7919) % 100_000 * 8, 8), now);
            if i >= 64 {
                assert!(matches!(s.dispatch(now), Dispatch::Request(_)));
            }
            now += Duration::from_micros(10);
            // Swept at the last insert, before this dispatch.
            let fifo = s.dirs[READ].fifo.len();
            most = most.max(fifo);
            assert!(
                fifo <= 4 * (s.queued() + 1) + 64,
                "{fifo} entries for {}",
                s.queued()
            );
        }
        eprintln!("at most {most} FIFO entries for 64 queued requests");
        assert!(most > 2 * 64, "no stale entries: the test misses its point");
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
