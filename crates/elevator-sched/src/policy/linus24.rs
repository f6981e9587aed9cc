//! linus24: the Linux 2.4 elevator, one sorted queue with passover budgets.
//!
//! `elevator_linus` of Linux 2.4.20 (drivers/block/elevator.c
//! `elevator_linus_merge`, drivers/block/ll_rw_blk.c `__make_request`,
//! include/linux/elevator.h), Andrea Arcangeli's 2000 design as reworked by
//! Jens Axboe's "elevator seek accounting fixes" (LKML, 15 Aug 2002,
//! merged for 2.4.20-pre2). The 2.4 block layer had no separate scheduler:
//! the driver takes requests from the head of one list, reads and writes
//! mixed, and the elevator decides where in that list a new request goes.
//!
//! # Insertion
//! The list is kept in ascending sector order, one sweep after another (a
//! request below the tail starts the next sweep at the tail). A new request
//! is looked at against the queue from the tail towards the head:
//! - a queued request of the same direction that ends where it starts
//!   (back merge) or starts where it ends (front merge), and stays within
//!   the queue's `max_sectors`, absorbs it; the scan stops there;
//! - otherwise the first request found (from the tail) after which the new
//!   one fits in sector order is its insertion point ("in between": above
//!   that request and below its successor, or past the top of a sweep);
//! - no request may be passed once its `elevator_sequence` budget is used
//!   up: the scan stops at the first request (from the tail) whose budget
//!   is `<= 0`, after trying a back merge into that request alone ("we
//!   can't insert beyond a zero sequence point"; 2.4.20's `backmerge_only`,
//!   the loop `while (!backmerge_only && ...)`): no front merge into it,
//!   nothing further toward the head is looked at;
//! - with no insertion point, the request goes to the tail (`insert_here =
//!   head->prev` in `__make_request`).
//!
//! Which scan 2.4.20/2.4.21 had: the `backmerge_only` loop above is the
//! one mainline shipped from Axboe's 2.4.20-pre2 rework to the end of 2.4
//! (2.4.32 still has it). Andrew Morton's read-latency2 (-aa, -ck, Red Hat
//! trees) replaced it with a `merge_only` flag that keeps scanning for
//! merges past a used-up budget; the 2.4.20-aa1 port of that patch (LKML,
//! 5 Dec 2002, "[PATCH 2.4.20-aa1] Readlatency-2") shows the mainline loop
//! it replaced.
//!
//! A new request starts with `read_latency` (reads) or `write_latency`
//! (writes) as its budget. Every request behind the insertion point, the
//! ones the new request passes over, loses `ELV_LINUS_SEEK_COST` = 16; on a
//! merge, every request behind the merged one loses 1 (a front-merged
//! request itself loses 1 too). After a merge the grown request is merged
//! with its list neighbour if they now touch; the survivor keeps the
//! smaller budget (`elevator_linus_merge_req`). There is no read preference
//! and no expiry by time.
//!
//! Reconciling the brief's "cost = the new request's size in sectors": that
//! was 2.4.0 to 2.4.19 (`elevator_merge_cleanup` charged the buffer's
//! sectors, every scan aged requests by 1, defaults 8192/16384). Axboe's
//! 2002 patch replaced it with 1 per merge and 16 per seek, and defaults
//! 2048/8192: "~128 seeks can pass a READ at most (and ~512 for WRITEs)".
//! This module implements 2.4.20.
//!
//! # max_bomb_segments
//! elvtune's third value. In mainline 2.4.20 and 2.4.21 it is inert: the
//! kernel reports 0 and ignores what is set ("Removed tests for
//! max-bomb-segments, which was breaking elvtune", Dave Jones, 20 Aug
//! 2000). The default here is 0, the same. A non-zero value enables Andrew
//! Morton's read-latency2 rule, which reused the field (-aa, Red Hat and
//! later 2.4 trees, default 6 there): an unmerged read that passed no other
//! read is moved forward to just behind the first writes from the head
//! whose weight `1 + sectors/64` each reaches `max_bomb_segments`, without
//! charging anyone's budget.
//!
//! # Where the rest of 2.4's block layer is
//! The active request stays at the list head in 2.4 (`head_active`, IDE's
//! default) and the scan stops before it: nothing merges into it and
//! nothing goes in right behind it. Here dispatched requests leave the
//! list, which comes to the same as long as the next request is taken as
//! soon as one completes, before the processes that completion woke can
//! submit: the engine's 2.4 configuration does that (`restart_before_
//! wakeup`, 2.4's `ide_intr` runs `ide_do_request` before returning).
//! 2.4 submits one buffer head at a time (`submit_bh`), so a 128 KiB
//! read-ahead is 32 calls here, each merging (cost 1) or starting a new
//! request (cost 16); the 2.4 host does that (`submit_buffers`). A buffer
//! that merges needs no request slot: [`Scheduler::would_merge`] tells the
//! engine. Plugging is not modelled: a queue only plugs when empty, and a
//! plugged queue's head is not active, which is what the list is here.
//! Segment limits and per-device ordering of partitions are not modelled;
//! flush requests are unmergeable writes.
//!
//! # The streaming reader's capture
//! With IDE's 64 KiB requests and 2.4's 128 KiB read-ahead windows a
//! window is two requests, and the next window is submitted when the
//! reader reaches the first page of the last one. Once an indirect-block
//! read or a short window has put the windows out of step with the
//! requests, the last request of a window is still queued when the next
//! window comes: its first buffers back-merge into it and the rest go in
//! right behind it, ahead of everyone else, who pay 62 per window. One
//! reader then holds the disk until the request behind it has used up its
//! budget (about 33 windows, 4 MB, for a read), and a dependent reader
//! waits that long for each read: the 2003 tables' "2.4 is unfair but
//! fast" with parallel streams and its minutes-long tree reads beside a
//! stream.
//!
//! # Invariants
//! The list holds each queued request once; a new request is never placed
//! at the head (it always goes behind some queued request); no request
//! with a budget `<= 0` has a new request inserted ahead of it.
//!
//! # Starvation bound
//! A request R has at most `max_queued - 1` requests ahead of it when it is
//! queued. Each later insertion ahead of R costs R 16 and none is allowed
//! once R's budget is `<= 0`, so at most `ceil(L / 16)` more come, with L
//! the larger of the two latencies; merges add no requests. R is therefore
//! dispatched within `(max_queued + ceil(L / 16))` service times. With
//! `max_bomb_segments > 0` reads are moved forward without being charged
//! and no bound is claimed.

use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, Tunable, Tunables};
use elevator_core::{Duration, Instant, Op, QueueLimits, Request, RequestId, Sector};
use std::collections::VecDeque;

/// A new read may be passed by about 128 seeks (2048 / 16): `ELEVATOR_LINUS`
/// read passovers in include/linux/elevator.h, 2.4.20.
pub const READ_LATENCY: i64 = 2048;
/// A new write may be passed by about 512 seeks (8192 / 16): `ELEVATOR_LINUS`
/// write passovers, 2.4.20.
pub const WRITE_LATENCY: i64 = 8192;
/// Inert in mainline 2.4.20/2.4.21 (elvtune reads 0); non-zero enables the
/// read-latency2 placement rule.
pub const MAX_BOMB_SEGMENTS: i64 = 0;
/// Budget a request loses when a new request is inserted ahead of it
/// (`ELV_LINUS_SEEK_COST`, a seek costs 16 merges).
pub const ELV_LINUS_SEEK_COST: i64 = 16;
/// Budget lost when a merge happens ahead of a request.
const MERGE_COST: i64 = 1;

pub const TYPE: SchedulerType = SchedulerType {
    name: "linus24",
    aliases: &["elevator_linus"],
    about: "one sector-sorted queue with passover budgets, reads and writes mixed (Linux 2.4 elevator)",
    honours: &[],
    tunables: &[
        Tunable {
            name: "read_latency",
            default: READ_LATENCY,
            unit: "passovers",
            about: "budget of a new read: 16 per request inserted ahead of it, 1 per merge ahead",
        },
        Tunable {
            name: "write_latency",
            default: WRITE_LATENCY,
            unit: "passovers",
            about: "budget of a new write",
        },
        Tunable {
            name: "max_bomb_segments",
            default: MAX_BOMB_SEGMENTS,
            unit: "writes",
            about: "0: inert as in 2.4.20; else read-latency2: unmerged reads go behind this many writes",
        },
    ],
    build: |t, limits| Box::new(Linus24::from_tunables(t, limits)),
};

/// A queued request as the scan sees it: its extent, direction and what
/// is left of its budget (`elevator_sequence`). The request itself waits
/// in `Linus24::requests`; the list stays small for the scans.
#[derive(Clone, Copy, Debug)]
struct Slot {
    sector: Sector,
    end: Sector,
    sequence: i64,
    write: bool,
    /// Index into `Linus24::requests`.
    at: usize,
}

/// What the scan found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    Back(usize),
    Front(usize),
    /// Insert after this index (or at the tail if `None`).
    Insert(Option<usize>),
}

/// The 2.4 elevator.
#[derive(Debug)]
pub struct Linus24 {
    /// Index 0 is the head, served next.
    list: VecDeque<Slot>,
    /// The queued requests, by `Slot::at`; `None` marks a free entry.
    requests: Vec<Option<Request>>,
    free: Vec<usize>,
    read_latency: i64,
    write_latency: i64,
    max_bomb_segments: i64,
    rule: MergeRule,
}

fn is_write(r: &Request) -> bool {
    r.op != Op::Read
}

impl Linus24 {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        Linus24 {
            list: VecDeque::new(),
            requests: Vec::new(),
            free: Vec::new(),
            read_latency: t.get("read_latency"),
            write_latency: t.get("write_latency"),
            max_bomb_segments: t.get("max_bomb_segments"),
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: true,
                same_task: false,
            },
        }
    }

    /// With 2.4.20's defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        Linus24::from_tunables(&t, limits)
    }

    /// The queue from head to tail with each request's remaining budget.
    pub fn sequences(&self) -> Vec<(RequestId, i64)> {
        self.list
            .iter()
            .map(|q| (self.request(q).id, q.sequence))
            .collect()
    }

    fn request(&self, slot: &Slot) -> &Request {
        self.requests[slot.at].as_ref().expect("queued")
    }

    fn store(&mut self, request: Request) -> usize {
        match self.free.pop() {
            Some(at) => {
                self.requests[at] = Some(request);
                at
            }
            None => {
                self.requests.push(Some(request));
                self.requests.len() - 1
            }
        }
    }

    fn take(&mut self, slot: Slot) -> Request {
        self.free.push(slot.at);
        self.requests[slot.at].take().expect("queued")
    }

    fn latency(&self, r: &Request) -> i64 {
        if is_write(r) {
            self.write_latency
        } else {
            self.read_latency
        }
    }

    /// Whether the request in `slot` and `b` may become one request,
    /// ignoring adjacency: same direction and within max_sectors as in 2.4,
    /// and (2.4 had neither) the same sync flag and group, since a merged
    /// request carries one of each; no flushes.
    fn mergeable(&self, slot: &Slot, b: &Request) -> bool {
        self.rule.compatible(self.request(slot), b)
    }

    /// Whether a request at `sector` belongs right after `list[i]`
    /// (kernel `bh_rq_in_between`): strictly between it and its successor,
    /// or, where a sweep ends at `i`, above it or below the next sweep's
    /// start. Never after the tail: that is the fallback, not a choice.
    fn in_between(&self, sector: Sector, i: usize) -> bool {
        let Some(next) = self.list.get(i + 1) else {
            return false;
        };
        let here = self.list[i].sector;
        let next = next.sector;
        if sector < next && sector > here {
            return true;
        }
        if next > here {
            return false;
        }
        sector > here || sector < next
    }

    /// The scan from the tail (kernel `elevator_linus_merge`, 2.4.20).
    fn scan(&self, new: &Request) -> (Found, bool) {
        let mut insert_after = None;
        let mut passed_a_read = false;
        let flush = new.op == Op::Flush;
        let front_end = new.sector + u64::from(new.sectors);
        for i in (0..self.list.len()).rev() {
            let q = &self.list[i];
            // A used-up budget ends the scan after this request: it may
            // still take a back merge, nothing else ("backmerge_only").
            let backmerge_only = q.sequence <= 0;
            if insert_after.is_none() && !backmerge_only && self.in_between(new.sector, i) {
                insert_after = Some(i);
            }
            if !q.write {
                passed_a_read = true;
            }
            if !flush {
                if q.end == new.sector && self.mergeable(q, new) {
                    return (Found::Back(i), passed_a_read);
                }
                if !backmerge_only && q.sector == front_end && self.mergeable(q, new) {
                    return (Found::Front(i), passed_a_read);
                }
            }
            if backmerge_only {
                break;
            }
        }
        (Found::Insert(insert_after), passed_a_read)
    }

    /// Charge `cost` to every request behind index `i`.
    fn charge_behind(&mut self, i: usize, cost: i64) {
        for q in self.list.range_mut(i + 1..) {
            q.sequence -= cost;
        }
    }

    /// Merge `list[i + 1]` into `list[i]` if they now touch (kernel
    /// `attempt_merge`); the survivor keeps the smaller budget.
    fn attempt_merge(&mut self, i: usize) {
        let Some(&next) = self.list.get(i + 1) else {
            return;
        };
        let here = self.list[i];
        if here.end != next.sector || !self.mergeable(&here, self.request(&next)) {
            return;
        }
        self.list.remove(i + 1);
        let gone = self.take(next);
        let here = &mut self.list[i];
        here.sequence = here.sequence.min(next.sequence);
        here.end = next.end;
        let survivor = self.requests[here.at].as_mut().expect("queued");
        survivor.sectors += gone.sectors;
        survivor.merged.extend(gone.ids());
    }

    /// read-latency2: move an unmerged read forward to just behind the
    /// writes from the head whose weight reaches `max_bomb_segments`.
    fn bomb_position(&self, insert_after: Option<usize>) -> Option<usize> {
        let mut weight = 0;
        for (i, q) in self.list.iter().enumerate() {
            if Some(i) == insert_after {
                break;
            }
            if q.write {
                let sectors = (q.end - q.sector) as i64;
                weight += 1 + sectors / 64;
                if weight >= self.max_bomb_segments {
                    return Some(i);
                }
            }
        }
        insert_after
    }
}

impl Scheduler for Linus24 {
    fn name(&self) -> &'static str {
        "linus24"
    }

    fn insert(&mut self, request: Request, _now: Instant) {
        let (found, passed_a_read) = self.scan(&request);
        match found {
            Found::Back(i) => {
                self.charge_behind(i, MERGE_COST);
                let slot = &mut self.list[i];
                slot.end += u64::from(request.sectors);
                let q = self.requests[slot.at].as_mut().expect("queued");
                q.sectors += request.sectors;
                q.merged.extend(request.ids());
                self.attempt_merge(i);
            }
            Found::Front(i) => {
                self.charge_behind(i, MERGE_COST);
                let slot = &mut self.list[i];
                slot.sequence -= MERGE_COST;
                slot.sector = request.sector;
                let q = self.requests[slot.at].as_mut().expect("queued");
                q.sector = request.sector;
                q.sectors += request.sectors;
                q.merged.extend(request.ids());
                if i > 0 {
                    self.attempt_merge(i - 1);
                }
            }
            Found::Insert(insert_after) => {
                if let Some(i) = insert_after {
                    self.charge_behind(i, ELV_LINUS_SEEK_COST);
                }
                let mut after = insert_after;
                if self.max_bomb_segments > 0 && !is_write(&request) && !passed_a_read {
                    after = self.bomb_position(insert_after);
                }
                let index = after.map_or(self.list.len(), |i| i + 1);
                let slot = Slot {
                    sector: request.sector,
                    end: request.end(),
                    sequence: self.latency(&request),
                    write: is_write(&request),
                    at: self.store(request),
                };
                self.list.insert(index, slot);
            }
        }
    }

    fn dispatch(&mut self, _now: Instant) -> Dispatch {
        match self.list.pop_front() {
            Some(slot) => Dispatch::Request(self.take(slot)),
            None => Dispatch::Empty,
        }
    }

    fn complete(&mut self, _request: &Request, _now: Instant) {}

    fn queued(&self) -> usize {
        self.list.len()
    }

    fn would_merge(&self, request: &Request) -> bool {
        matches!(self.scan(request).0, Found::Back(_) | Found::Front(_))
    }

    fn check_invariants(&self) -> Result<(), String> {
        // The list and the request store describe the same requests: each
        // slot points at a distinct stored request with its extent and
        // direction, and every other entry is on the free list.
        let mut seen = vec![false; self.requests.len()];
        for (i, slot) in self.list.iter().enumerate() {
            let Some(Some(r)) = self.requests.get(slot.at) else {
                return Err(format!("list[{i}] points at empty entry {}", slot.at));
            };
            if std::mem::replace(&mut seen[slot.at], true) {
                return Err(format!("entry {} is on the list twice", slot.at));
            }
            if (r.sector, r.end(), is_write(r)) != (slot.sector, slot.end, slot.write) {
                return Err(format!("list[{i}] says {slot:?} but holds {r}"));
            }
        }
        let stored = self.requests.iter().flatten().count();
        if stored != self.list.len() || stored + self.free.len() != self.requests.len() {
            let (list, free) = (self.list.len(), self.free.len());
            return Err(format!(
                "{stored} stored requests, {list} on the list, {free} free of {}",
                self.requests.len()
            ));
        }
        Ok(())
    }

    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        if self.max_bomb_segments > 0 {
            return None;
        }
        let budget = self.read_latency.max(self.write_latency).max(0) as u64;
        let passes = budget.div_ceil(ELV_LINUS_SEEK_COST as u64);
        Some(service.mul(max_queued as u64 + passes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(s: &Linus24) -> Vec<u64> {
        s.list.iter().map(|q| s.request(q).id.0).collect()
    }

    fn at(s: &Linus24, i: usize) -> &Request {
        s.request(&s.list[i])
    }

    fn seq(s: &Linus24, id: u64) -> i64 {
        s.list
            .iter()
            .find(|q| s.request(q).id.0 == id)
            .expect("queued")
            .sequence
    }

    fn with(overrides: &[(&str, i64)]) -> Linus24 {
        let t = TYPE.tunables(overrides.iter().copied()).unwrap();
        Linus24::from_tunables(&t, &QueueLimits::default())
    }

    fn drain(s: &mut Linus24) -> Vec<u64> {
        let mut out = Vec::new();
        while let Dispatch::Request(r) = s.dispatch(Instant::ZERO) {
            out.push(r.id.0);
        }
        out
    }

    #[test]
    fn inserts_in_sector_order_one_sweep_after_another() {
        let mut s = Linus24::new(&QueueLimits::default());
        let t = Instant::ZERO;
        s.insert(Request::read(1, 1, 100, 8), t);
        s.insert(Request::read(2, 1, 300, 8), t);
        // Between 100 and 300.
        s.insert(Request::write(3, 2, 200, 8), t);
        assert_eq!(order(&s), vec![1, 3, 2]);
        // Below the head: never in front of it; starts the next sweep.
        s.insert(Request::read(4, 1, 50, 8), t);
        assert_eq!(order(&s), vec![1, 3, 2, 4]);
        // Above the top of the first sweep: right after it.
        s.insert(Request::read(5, 1, 400, 8), t);
        assert_eq!(order(&s), vec![1, 3, 2, 5, 4]);
        // Into the second sweep.
        s.insert(Request::read(6, 1, 60, 8), t);
        s.insert(Request::read(7, 1, 10, 8), t);
        assert_eq!(order(&s), vec![1, 3, 2, 5, 7, 4, 6]);
        assert_eq!(drain(&mut s), vec![1, 3, 2, 5, 7, 4, 6]);
    }

    #[test]
    fn passed_requests_pay_sixteen_and_the_new_one_starts_with_its_latency() {
        let mut s = Linus24::new(&QueueLimits::default());
        let t = Instant::ZERO;
        s.insert(Request::read(1, 1, 100, 8), t);
        s.insert(Request::write(2, 1, 300, 8), t);
        s.insert(Request::read(3, 1, 500, 8), t);
        s.insert(Request::write(4, 2, 200, 8), t);
        assert_eq!(
            s.sequences()
                .iter()
                .map(|&(id, q)| (id.0, q))
                .collect::<Vec<_>>(),
            vec![(1, 2048), (4, 8192), (2, 8192 - 16), (3, 2048 - 16)]
        );
    }

    #[test]
    fn merges_cost_one_behind_and_coalesce_with_neighbours() {
        let mut s = Linus24::new(&QueueLimits::default());
        let t = Instant::ZERO;
        s.insert(Request::write(1, 1, 100, 8), t);
        s.insert(Request::write(2, 1, 116, 8), t);
        s.insert(Request::read(3, 1, 500, 8), t);
        // Found first from the tail: a front merge into 2 (108..124), which
        // then touches 1 and is swallowed by it.
        s.insert(Request::write(4, 1, 108, 8), t);
        assert_eq!(order(&s), vec![1, 3]);
        let r = at(&s, 0);
        assert_eq!((r.sector, r.sectors), (100, 24));
        // 2 was charged 1 for the merge; the survivor keeps the smaller budget.
        assert_eq!(seq(&s, 1), 8192 - 1);
        // Read 3 was behind both merges: 1 for the back merge.
        assert_eq!(seq(&s, 3), 2048 - 1);
        // Front merge into 3: 3 itself pays 1.
        s.insert(Request::read(5, 1, 492, 8), t);
        assert_eq!(seq(&s, 3), 2048 - 2);
        assert_eq!(at(&s, 1).sector, 492);
        // Reads and writes do not merge.
        s.insert(Request::read(6, 1, 124, 8), t);
        assert_eq!(s.queued(), 3);
        let mut ids: Vec<u64> = at(&s, 0).ids().map(|i| i.0).collect();
        ids.sort();
        assert_eq!(ids, vec![1, 2, 4]);
    }

    #[test]
    fn a_used_up_budget_ends_the_scan_after_a_back_merge_try() {
        let mut s = with(&[("read_latency", 32)]);
        let t = Instant::ZERO;
        s.insert(Request::write(1, 1, 0, 8), t);
        s.insert(Request::read(2, 1, 1_000_000, 8), t);
        s.insert(Request::write(3, 2, 1000, 8), t);
        s.insert(Request::write(4, 2, 2000, 8), t);
        assert_eq!(seq(&s, 2), 0);
        // The read's budget is used up: the next write goes to the tail.
        s.insert(Request::write(5, 2, 3000, 8), t);
        assert_eq!(order(&s), vec![1, 3, 4, 2, 5]);
        // 2.4.20 stops scanning at the read: the write that would join 4
        // (ahead of the read) is not seen as a merge and goes to the tail.
        s.insert(Request::write(6, 2, 2008, 8), t);
        assert_eq!(order(&s), vec![1, 3, 4, 2, 5, 6]);
        assert_eq!(at(&s, 2).sectors, 8);
        // The used-up request itself still takes a back merge (which costs
        // the requests behind it 1 each) ...
        let before = seq(&s, 5);
        s.insert(Request::read(7, 1, 1_000_008, 8), t);
        assert_eq!(order(&s), vec![1, 3, 4, 2, 5, 6]);
        assert_eq!(at(&s, 3).sectors, 16);
        assert_eq!(seq(&s, 5), before - 1);
        // ... but no front merge: 8 ends where the read starts and is
        // placed on its own (after 5, where the sweep turns).
        s.insert(Request::read(8, 1, 999_992, 8), t);
        assert_eq!(order(&s), vec![1, 3, 4, 2, 5, 8, 6]);
        assert_eq!(at(&s, 3).sectors, 16);
    }

    /// The 2.4 streaming reader's capture: with 64 KiB requests and
    /// 128 KiB read-ahead windows out of step with them, each new window's
    /// first buffers back-merge into the reader's own partial request that
    /// still waits, and the rest go in right behind it, ahead of another
    /// reader's read, which pays 1 per merge and 16 per new request until
    /// its budget is gone.
    #[test]
    fn a_streamer_merging_into_its_own_queued_tail_passes_a_waiting_read() {
        let limits = QueueLimits {
            max_sectors: 128,
            ..QueueLimits::default()
        };
        let mut s = Linus24::new(&limits);
        let t = Instant::ZERO;
        let mut id = 0;
        let mut window = |s: &mut Linus24, first_block: u64, blocks: u64| {
            for b in first_block..first_block + blocks {
                id += 1;
                s.insert(Request::read(1000 + id, 1, 1_000_000 + b * 8, 8), t);
            }
        };
        // The streamer's last window ended in a 9-block request.
        window(&mut s, 0, 9);
        // Another process's read, elsewhere, waits behind it.
        s.insert(Request::read(1, 2, 50_000, 8), t);
        assert_eq!(seq(&s, 1), READ_LATENCY);
        let last = |s: &Linus24| s.request(s.list.back().expect("queued")).id.0;
        let mut windows = 0;
        let mut next = 9;
        while seq(&s, 1) > 0 {
            window(&mut s, next, 32);
            next += 32;
            windows += 1;
            if windows == 1 {
                // 7 blocks joined the 9-block request; the other 25 formed
                // two requests queued right behind it, ahead of the read,
                // which paid 7 + (16 + 15) + (16 + 8) = 62.
                assert_eq!(s.list.len(), 4);
                assert_eq!(seq(&s, 1), READ_LATENCY - 62);
            }
            // While it has budget left, everything the streamer added went
            // in ahead of the read.
            if seq(&s, 1) > 0 {
                assert_eq!(last(&s), 1, "window {windows}");
            }
            // Meanwhile the disk took the streamer's oldest request.
            assert!(matches!(s.dispatch(t), Dispatch::Request(r) if r.id.0 != 1));
            assert!(windows < 100);
        }
        println!(
            "the waiting read was passed by {windows} windows ({} KiB) before its budget ran out",
            windows * 128
        );
        // 2048 / 62: 33 windows, the 34th uses it up part way, and its
        // last buffers already queue behind the read.
        assert_eq!(windows, 34);
        assert_ne!(last(&s), 1);
    }

    #[test]
    fn would_merge_answers_what_insert_would_do() {
        let mut s = with(&[("write_latency", 16)]);
        let t = Instant::ZERO;
        s.insert(Request::write(9, 1, 100, 8), t);
        s.insert(Request::write(1, 1, 1000, 8), t);
        assert!(s.would_merge(&Request::write(2, 1, 1008, 8)));
        assert!(s.would_merge(&Request::write(2, 1, 992, 8)));
        assert!(!s.would_merge(&Request::write(2, 1, 5000, 8)));
        assert!(!s.would_merge(&Request::read(2, 1, 1008, 8)));
        // 2 goes in front of 1 (between 9 and 1, sector order) and uses up
        // its budget; the scan now stops at 1: nothing merges with 2.
        s.insert(Request::write(2, 1, 500, 8), t);
        assert_eq!(seq(&s, 1), 0);
        assert!(!s.would_merge(&Request::write(3, 1, 508, 8)));
        assert!(s.would_merge(&Request::write(3, 1, 1008, 8)));
        let queued = s.queued();
        s.insert(Request::write(3, 1, 508, 8), t);
        assert_eq!(s.queued(), queued + 1);
    }

    #[test]
    fn a_flood_of_writes_cannot_pass_an_older_read_for_ever() {
        let mut s = Linus24::new(&QueueLimits::default());
        let t = Instant::ZERO;
        s.insert(Request::write(1, 1, 0, 8), t);
        s.insert(Request::read(2, 2, 10_000_000, 8), t);
        // 1000 writes, each fitting between the head and the read, none
        // contiguous with another.
        for i in 0..1000u64 {
            s.insert(Request::write(100 + i, 1, 1000 + i * 16, 8), t);
        }
        let out = drain(&mut s);
        let pos = out.iter().position(|&id| id == 2).unwrap();
        println!(
            "the read went out {}th of {}, behind {} writes",
            pos + 1,
            out.len(),
            pos
        );
        // The head write plus 2048 / 16 = 128 writes got ahead of it.
        assert_eq!(pos, 1 + 128);
        assert!(pos as u64 <= 2 + (READ_LATENCY as u64).div_ceil(ELV_LINUS_SEEK_COST as u64));
    }

    #[test]
    fn read_latency_zero_means_nobody_passes_a_read() {
        let mut s = with(&[("read_latency", 0)]);
        let t = Instant::ZERO;
        s.insert(Request::write(1, 1, 0, 8), t);
        s.insert(Request::read(2, 2, 10_000, 8), t);
        s.insert(Request::write(3, 1, 5000, 8), t);
        assert_eq!(drain(&mut s), vec![1, 2, 3]);
    }

    #[test]
    fn read_latency2_moves_a_read_behind_the_first_writes() {
        let mut s = with(&[("max_bomb_segments", 2)]);
        let t = Instant::ZERO;
        for i in 0..6u64 {
            s.insert(Request::write(i, 1, i * 100, 8), t);
        }
        // Would go to the tail (above everything); goes behind two writes.
        s.insert(Request::read(10, 2, 10_000, 8), t);
        assert_eq!(order(&s), vec![0, 1, 10, 2, 3, 4, 5]);
        assert_eq!(s.starvation_bound(Duration(1), 10), None);
    }

    #[test]
    fn bound_counts_the_queue_and_the_passovers() {
        let s = Linus24::new(&QueueLimits::default());
        // 8192 / 16 = 512 passovers.
        assert_eq!(
            s.starvation_bound(Duration(10), 100),
            Some(Duration(10 * 612))
        );
    }
}
