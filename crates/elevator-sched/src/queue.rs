//! The sector-sorted request queue with front and back merging that every
//! sorting policy shares (the kernel's elevator rbtree plus merge hash).
//!
//! [`PlacedQueue`] stores each request once, in a slab of slots (a `Vec`
//! with a free list, one cache line per slot), so its indexes hold small
//! slot numbers: an [`OrderIndex`] (a chunked sorted array) orders the
//! slots by (start sector, id), and a hash finds the request ending where
//! a new one starts (back merge). A front merge looks the order up for a
//! request starting where the new one ends. After either merge the
//! survivor is tried against its new neighbour (the kernel's
//! `attempt_back_merge`/`attempt_front_merge`), so a gap that a request
//! fills closes completely. A policy reaches its requests there by
//! [`Place`] (slot and id), and may index side tables of its own by the
//! slot number (deadline keeps its FIFO keys so).
//!
//! [`SortedQueue`] is the same queue reached by request id: a
//! `PlacedQueue` plus a hash from id to slot.
//!
//! Invariants: the order index and the full slots hold the same requests,
//! and `free` lists exactly the empty slots; every entry of `by_end` points
//! at a queued request ending at that sector; no merged request exceeds
//! `MergeRule::max_sectors`.
//!
//! [`FifoQueue`] is the same merging without the sort tree, for a policy
//! that only keeps arrival order (noop): a list plus the merge hash.
//!
//! [`BackSeek`] picks the better of two queued requests for a head
//! position, as CFQ and BFQ choose a queue's next request.

use elevator_core::{Op, Request, RequestId, Sector};
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::collections::VecDeque;

/// The one-way elevator with short, penalised back seeks that CFQ and BFQ
/// use to choose a queue's next request (`cfq_choose_req`, whence
/// `bfq_choose_req`): sync before async, then metadata before data, then
/// the nearer to the head, a seek backwards counting `penalty` times its
/// length and allowed up to `max` sectors; past that a request waits for
/// the head to wrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackSeek {
    /// Longest backward seek taken, sectors (`back_seek_max` KiB × 2).
    pub max: u64,
    /// Cost of a backward sector in forward ones (`back_seek_penalty`).
    pub penalty: u64,
}

impl BackSeek {
    /// Whether `a` goes before `b` with the head at `last`.
    pub fn prefers(&self, a: &Request, b: &Request, last: Sector) -> bool {
        let sync = |r: &Request| r.op == Op::Read || r.sync;
        if sync(a) != sync(b) {
            return sync(a);
        }
        if a.meta != b.meta {
            return a.meta;
        }
        let dist = |s: Sector| -> Option<u64> {
            if s >= last {
                Some(s - last)
            } else if s + self.max >= last {
                Some((last - s) * self.penalty)
            } else {
                None // behind the head beyond `max`: wraps
            }
        };
        match (dist(a.sector), dist(b.sector)) {
            (Some(da), Some(db)) if da != db => da < db,
            (Some(_), Some(_)) => a.sector >= b.sector,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            // Both wrapped: start with the one furthest behind (one long
            // back seek, then forward).
            (None, None) => a.sector <= b.sector,
        }
    }
}

/// When two adjacent requests may become one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeRule {
    /// Largest merged request in sectors (the queue's `max_sectors`).
    pub max_sectors: u32,
    /// Look for front merges too (deadline's `front_merges`).
    pub front_merges: bool,
    /// Only merge requests of the same task (per-task queues: CFQ, BFQ).
    pub same_task: bool,
}

impl MergeRule {
    /// Whether `a` (queued) and `b` may merge, ignoring adjacency.
    pub fn compatible(&self, a: &Request, b: &Request) -> bool {
        a.op == b.op
            && a.op != Op::Flush
            && a.sync == b.sync
            && a.group == b.group
            && (!self.same_task || a.task == b.task)
            && a.sectors + b.sectors <= self.max_sectors
    }
}

/// What became of a request offered for merging.
#[derive(Debug, PartialEq, Eq)]
pub enum MergeOutcome {
    /// Not merged: queue it yourself.
    None(Request),
    /// Absorbed into `survivor`; if the survivor then also swallowed a
    /// queued neighbour, that neighbour's id is in `absorbed_queued`.
    Merged {
        survivor: RequestId,
        absorbed_queued: Option<RequestId>,
    },
}

/// [`MergeOutcome`] by place, from [`PlacedQueue::merge`].
#[derive(Debug, PartialEq, Eq)]
pub enum PlacedMerge {
    /// Not merged: queue it yourself.
    None(Request),
    /// Absorbed into the request at `survivor`; a queued neighbour the
    /// survivor then swallowed had the (now stale) place `absorbed_queued`.
    /// Until the next insert, its slot number still names the swallowed
    /// request in the caller's side tables.
    Merged {
        survivor: Place,
        absorbed_queued: Option<Place>,
    },
}

/// Where a queued request sits in a [`PlacedQueue`]: a handle that reaches
/// it without a hash lookup. A place stays valid while its request is
/// queued (a merge keeps the survivor's place) and goes stale once the
/// request leaves: [`PlacedQueue::at`] then answers `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    slot: u32,
    id: RequestId,
}

impl Place {
    /// A small number, below the most requests ever queued at once, for
    /// indexing per-request side tables. Another request gets it after
    /// this one leaves.
    pub fn slot(self) -> usize {
        self.slot as usize
    }

    /// The request's id.
    pub fn id(self) -> RequestId {
        self.id
    }
}

/// The most entries one chunk of an [`OrderIndex`] holds; a chunk that
/// grows past it splits in two. An insert or removal moves up to this many
/// entries (24 bytes each) within a chunk.
const CHUNK: usize = 64;

/// The sort order of a [`PlacedQueue`]: (start sector, id) keys with their
/// places, in one sorted array cut into chunks of at most [`CHUNK`]
/// entries. `heads` holds each chunk's first key; a binary search over the
/// heads finds the chunk and one inside it finds the entry, and an insert
/// or a removal moves the entries of one chunk only. A key puts the sector
/// above the id in one `u128`, so requests starting at the same sector go
/// by id.
///
/// Searches are what cost (their branches are unpredictable), and the
/// usual next search lands where the last one did: a policy sweeping in
/// sector order removes the request that followed the one it removed
/// before, and a request that found nothing to front-merge with is then
/// inserted where that probe ended. So the index remembers those two
/// positions and checks them, with two key comparisons, before searching.
///
/// (`BTreeMap` did this job before; for the few thousand entries a queue
/// holds, this spends about a third of the instructions and mispredicts
/// far fewer branches.)
///
/// Invariants: no chunk is empty; `heads[c]` is the key of `chunks[c][0]`;
/// the chunks, one after another, hold strictly increasing keys. The
/// remembered positions are guesses that may be out of date.
#[derive(Debug, Default)]
struct OrderIndex {
    heads: Vec<u128>,
    chunks: Vec<Vec<Indexed>>,
    /// Where the entry after the last removed one is.
    after_removal: Pos,
    /// Where the last probe for a front merge ended.
    after_probe: Pos,
}

/// One entry of an [`OrderIndex`].
#[derive(Clone, Copy, Debug)]
struct Indexed {
    sector: Sector,
    place: Place,
}

impl Indexed {
    fn key(&self) -> u128 {
        order_key(self.sector, self.place.id)
    }
}

fn order_key(sector: Sector, id: RequestId) -> u128 {
    (u128::from(sector) << 64) | u128::from(id.0)
}

/// A position in an [`OrderIndex`]: entry `i` of chunk `chunk`, or one
/// past a chunk's last entry.
#[derive(Clone, Copy, Debug, Default)]
struct Pos {
    chunk: usize,
    i: usize,
}

impl OrderIndex {
    /// The position of the first entry with a key of at least `key`. Any
    /// chunk but the first starts at or below `key`. Tries `guess` first.
    fn search(&self, key: u128, guess: Pos) -> Pos {
        if self.is_lower_bound(key, guess) {
            return guess;
        }
        let chunk = self.heads.partition_point(|&h| h <= key).saturating_sub(1);
        let i = self.chunks[chunk].partition_point(|e| e.key() < key);
        Pos { chunk, i }
    }

    /// Whether `at` is inside a chunk, between an entry below `key` and
    /// one at or above it. (Never at a chunk's first entry, so
    /// `Pos::default()` stands for no guess.)
    fn is_lower_bound(&self, key: u128, at: Pos) -> bool {
        match self.chunks.get(at.chunk) {
            Some(chunk) if at.i > 0 && at.i < chunk.len() => {
                chunk[at.i - 1].key() < key && key <= chunk[at.i].key()
            }
            _ => false,
        }
    }

    /// The entry at `at`, or if that is one past a chunk's end, the next
    /// chunk's first.
    fn entry(&self, at: Pos) -> Option<&Indexed> {
        match self.chunks.get(at.chunk)?.get(at.i) {
            Some(e) => Some(e),
            None => self.chunks.get(at.chunk + 1)?.first(),
        }
    }

    /// The first entry with a key of at least `key`.
    fn at_or_after(&self, key: u128) -> Option<&Indexed> {
        if self.chunks.is_empty() {
            return None;
        }
        self.entry(self.search(key, Pos::default()))
    }

    /// [`at_or_after`](Self::at_or_after), remembering where it ended for
    /// the insert that may follow.
    fn probe(&mut self, key: u128) -> Option<&Indexed> {
        if self.chunks.is_empty() {
            return None;
        }
        self.after_probe = self.search(key, Pos::default());
        self.entry(self.after_probe)
    }

    /// The last entry with a key below `key`.
    fn before(&self, key: u128) -> Option<&Indexed> {
        if self.chunks.is_empty() {
            return None;
        }
        let at = self.search(key, Pos::default());
        match at.i {
            0 => self.chunks.get(at.chunk.checked_sub(1)?)?.last(),
            i => self.chunks[at.chunk].get(i - 1),
        }
    }

    fn insert(&mut self, sector: Sector, place: Place) {
        let new = Indexed { sector, place };
        let key = new.key();
        if self.chunks.is_empty() {
            self.heads.push(key);
            self.chunks.push(vec![new]);
            return;
        }
        let at = self.search(key, self.after_probe);
        let chunk = &mut self.chunks[at.chunk];
        debug_assert!(
            chunk.get(at.i).is_none_or(|e| e.key() != key),
            "indexed twice"
        );
        chunk.insert(at.i, new);
        if at.i == 0 {
            self.heads[at.chunk] = key;
        }
        if chunk.len() > CHUNK {
            let upper = chunk.split_off(CHUNK / 2);
            self.heads.insert(at.chunk + 1, upper[0].key());
            self.chunks.insert(at.chunk + 1, upper);
        }
    }

    /// Remove the entry for (`sector`, `id`), which must be there, and
    /// return the entry that followed it.
    fn remove(&mut self, sector: Sector, id: RequestId) -> Option<&Indexed> {
        let key = order_key(sector, id);
        let Pos { chunk: c, i } = self.search(key, self.after_removal);
        let chunk = &mut self.chunks[c];
        debug_assert!(chunk.get(i).is_some_and(|e| e.key() == key), "indexed");
        chunk.remove(i);
        // Where the next entry is now.
        let mut next = Pos { chunk: c, i };
        if chunk.is_empty() {
            self.chunks.remove(c);
            self.heads.remove(c);
        } else {
            if i == 0 {
                self.heads[c] = chunk[0].key();
            }
            // Join two neighbours that fit in half a chunk, so that
            // removals do not leave a trail of tiny chunks behind.
            if self
                .chunks
                .get(c + 1)
                .is_some_and(|after| self.chunks[c].len() + after.len() <= CHUNK / 2)
            {
                let after = self.chunks.remove(c + 1);
                self.heads.remove(c + 1);
                self.chunks[c].extend(after);
            }
            if i == self.chunks[c].len() {
                next = Pos { chunk: c + 1, i: 0 };
            }
        }
        self.after_removal = next;
        self.entry(next)
    }

    /// All entries in order.
    fn iter(&self) -> impl Iterator<Item = &Indexed> + '_ {
        self.chunks.iter().flatten()
    }
}

/// A slot of a [`PlacedQueue`]: a request (64 bytes) on a cache line of its
/// own, so reaching it costs one line rather than two.
#[derive(Debug)]
#[repr(align(64))]
struct Slot(Option<Request>);

/// Queued requests sorted by start sector, reached by [`Place`]: the core
/// of [`SortedQueue`] without its index by id, for a policy that keeps
/// places rather than ids (deadline), and so saves a hash insert and
/// removal per request.
#[derive(Debug, Default)]
pub struct PlacedQueue {
    /// The requests by slot number; `None` is a free slot.
    slots: Vec<Slot>,
    /// The free slots; the one freed last is reused first (still cached).
    free: Vec<u32>,
    /// The sort order: places by (start sector, id).
    by_sector: OrderIndex,
    /// End sector to the slot of a request ending there (the merge hash).
    by_end: FxHashMap<Sector, u32>,
}

impl PlacedQueue {
    pub fn new() -> Self {
        PlacedQueue::default()
    }

    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The request at `place`, if it is still queued.
    pub fn at(&self, place: Place) -> Option<&Request> {
        self.slots
            .get(place.slot())?
            .0
            .as_ref()
            .filter(|r| r.id == place.id)
    }

    /// Queue `request` without trying to merge it; returns its place.
    pub fn insert(&mut self, request: Request) -> Place {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(Slot(None));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 requests queued")
            }
        };
        let place = Place {
            slot,
            id: request.id,
        };
        self.by_sector.insert(request.sector, place);
        self.by_end.insert(request.end(), slot);
        self.slots[slot as usize] = Slot(Some(request));
        place
    }

    /// Remove the request at `place`, if it is still queued.
    pub fn remove(&mut self, place: Place) -> Option<Request> {
        self.remove_with_next(place).map(|(request, _)| request)
    }

    /// Remove the request at `place`, if it is still queued, and tell which
    /// request follows it in sector order (what `next_after` would have
    /// said), in one pass.
    pub fn remove_with_next(&mut self, place: Place) -> Option<(Request, Option<Place>)> {
        self.at(place)?;
        Some(self.remove_slot(place.slot))
    }

    fn request(&self, slot: u32) -> &Request {
        self.slots[slot as usize]
            .0
            .as_ref()
            .expect("an indexed slot is full")
    }

    /// Take the request out of `slot` and out of every index; also
    /// returns the place of the request that followed it in sector order.
    fn remove_slot(&mut self, slot: u32) -> (Request, Option<Place>) {
        let request = self.slots[slot as usize]
            .0
            .take()
            .expect("an indexed slot is full");
        self.free.push(slot);
        let next = self
            .by_sector
            .remove(request.sector, request.id)
            .map(|e| e.place);
        self.unindex_end(request.end(), slot);
        (request, next)
    }

    /// Forget that `slot` ends at `end`, if the hash still says so.
    fn unindex_end(&mut self, end: Sector, slot: u32) {
        if let Entry::Occupied(e) = self.by_end.entry(end) {
            if *e.get() == slot {
                e.remove();
            }
        }
    }

    /// The queued request with the lowest start sector.
    pub fn first(&self) -> Option<Place> {
        self.by_sector.iter().next().map(|e| e.place)
    }

    /// The first request starting at or after `sector`.
    pub fn first_at_or_after(&self, sector: Sector) -> Option<Place> {
        self.by_sector
            .at_or_after(order_key(sector, RequestId(0)))
            .map(|e| e.place)
    }

    /// The first request (lowest id) starting exactly at `sector` (a
    /// probe for a merge: the index remembers where it looked).
    fn starting_at(&mut self, sector: Sector) -> Option<Place> {
        self.by_sector
            .probe(order_key(sector, RequestId(0)))
            .filter(|e| e.sector == sector)
            .map(|e| e.place)
    }

    /// The request after the one at `place` in sector order (no
    /// wrap-around).
    pub fn next_after(&self, place: Place) -> Option<Place> {
        let key = order_key(self.at(place)?.sector, place.id);
        // The first key above this one (there is none above the largest).
        let above = key.checked_add(1)?;
        self.by_sector.at_or_after(above).map(|e| e.place)
    }

    /// The request before the one at `place` in sector order.
    pub fn prev_before(&self, place: Place) -> Option<Place> {
        let key = order_key(self.at(place)?.sector, place.id);
        self.by_sector.before(key).map(|e| e.place)
    }

    /// Requests in ascending sector order.
    pub fn iter(&self) -> impl Iterator<Item = &Request> + '_ {
        self.by_sector.iter().map(|e| self.request(e.place.slot))
    }

    /// Try to merge `request` into a queued neighbour under `rule`.
    pub fn merge(&mut self, request: Request, rule: &MergeRule) -> PlacedMerge {
        // Back merge: a queued request ends where this one starts.
        if let Some(&slot) = self.by_end.get(&request.sector) {
            if rule.compatible(self.request(slot), &request) {
                self.extend_back(slot, request);
                let absorbed_queued = self.coalesce_forward(slot, rule);
                return self.merged(slot, absorbed_queued);
            }
        }
        // Front merge: a queued request starts where this one ends.
        if rule.front_merges {
            if let Some(Place { slot, .. }) = self.starting_at(request.end()) {
                if rule.compatible(self.request(slot), &request) {
                    self.extend_front(slot, request);
                    let absorbed_queued = self.coalesce_backward(slot, rule);
                    return self.merged(slot, absorbed_queued);
                }
            }
        }
        PlacedMerge::None(request)
    }

    fn merged(&self, slot: u32, absorbed_queued: Option<Place>) -> PlacedMerge {
        PlacedMerge::Merged {
            survivor: Place {
                slot,
                id: self.request(slot).id,
            },
            absorbed_queued,
        }
    }

    /// Append `tail`'s sectors to the queued request in `slot`.
    fn extend_back(&mut self, slot: u32, tail: Request) {
        let r = self.slots[slot as usize].0.as_mut().expect("queued");
        let old_end = r.end();
        r.sectors += tail.sectors;
        r.merged.extend(tail.ids());
        let new_end = r.end();
        self.unindex_end(old_end, slot);
        self.by_end.insert(new_end, slot);
    }

    /// Prepend `head`'s sectors to the queued request in `slot` (re-keys it).
    fn extend_front(&mut self, slot: u32, head: Request) {
        let r = self.slots[slot as usize].0.as_mut().expect("queued");
        self.by_sector.remove(r.sector, r.id);
        r.sector = head.sector;
        r.sectors += head.sectors;
        r.merged.extend(head.ids());
        self.by_sector.insert(r.sector, Place { slot, id: r.id });
    }

    /// After a back merge into `slot`, swallow the queued request that now
    /// starts where it ends, if allowed.
    fn coalesce_forward(&mut self, slot: u32, rule: &MergeRule) -> Option<Place> {
        let next = self.starting_at(self.request(slot).end())?.slot;
        if next == slot || !rule.compatible(self.request(slot), self.request(next)) {
            return None;
        }
        let (n, _) = self.remove_slot(next);
        let gone = Place {
            slot: next,
            id: n.id,
        };
        self.extend_back(slot, n);
        Some(gone)
    }

    /// After a front merge into `slot`, let the queued request that ends
    /// where it now starts swallow it (the survivor keeps the lower sector).
    fn coalesce_backward(&mut self, slot: u32, rule: &MergeRule) -> Option<Place> {
        let &prev = self.by_end.get(&self.request(slot).sector)?;
        if prev == slot || !rule.compatible(self.request(prev), self.request(slot)) {
            return None;
        }
        // Keep `slot` as the survivor so callers' references stay valid:
        // take the lower request's sectors into it.
        let (p, _) = self.remove_slot(prev);
        let gone = Place {
            slot: prev,
            id: p.id,
        };
        self.extend_front(slot, p);
        Some(gone)
    }
}

/// Queued requests sorted by start sector, by id: a [`PlacedQueue`] plus
/// a hash from id to slot.
///
/// Invariant: `by_id` holds exactly the queued requests, each with its
/// slot.
#[derive(Debug, Default)]
pub struct SortedQueue {
    queue: PlacedQueue,
    by_id: FxHashMap<RequestId, u32>,
}

impl SortedQueue {
    pub fn new() -> Self {
        SortedQueue::default()
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn contains(&self, id: RequestId) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Where queued request `id` is.
    fn place(&self, id: RequestId) -> Option<Place> {
        self.by_id.get(&id).map(|&slot| Place { slot, id })
    }

    pub fn get(&self, id: RequestId) -> Option<&Request> {
        self.queue.at(self.place(id)?)
    }

    /// Queue `request` without trying to merge it.
    pub fn insert(&mut self, request: Request) {
        let place = self.queue.insert(request);
        let old = self.by_id.insert(place.id, place.slot);
        debug_assert!(old.is_none(), "request {:?} queued twice", place.id);
    }

    /// Remove a queued request.
    pub fn remove(&mut self, id: RequestId) -> Option<Request> {
        self.remove_with_next(id).map(|(request, _)| request)
    }

    /// Remove a queued request and tell which request follows it in sector
    /// order (what `next_after` would have said), in one pass.
    pub fn remove_with_next(&mut self, id: RequestId) -> Option<(Request, Option<RequestId>)> {
        let slot = self.by_id.remove(&id)?;
        let (request, next) = self
            .queue
            .remove_with_next(Place { slot, id })
            .expect("indexed requests are queued");
        Some((request, next.map(Place::id)))
    }

    /// The queued request with the lowest start sector.
    pub fn first(&self) -> Option<RequestId> {
        self.queue.first().map(Place::id)
    }

    /// The first request starting at or after `sector`.
    pub fn first_at_or_after(&self, sector: Sector) -> Option<RequestId> {
        self.queue.first_at_or_after(sector).map(Place::id)
    }

    /// The request after `id` in sector order (no wrap-around).
    pub fn next_after(&self, id: RequestId) -> Option<RequestId> {
        self.queue.next_after(self.place(id)?).map(Place::id)
    }

    /// The request before `id` in sector order.
    pub fn prev_before(&self, id: RequestId) -> Option<RequestId> {
        self.queue.prev_before(self.place(id)?).map(Place::id)
    }

    /// Requests in ascending sector order.
    pub fn iter(&self) -> impl Iterator<Item = &Request> + '_ {
        self.queue.iter()
    }

    /// Try to merge `request` into a queued neighbour under `rule`.
    pub fn merge(&mut self, request: Request, rule: &MergeRule) -> MergeOutcome {
        match self.queue.merge(request, rule) {
            PlacedMerge::None(request) => MergeOutcome::None(request),
            PlacedMerge::Merged {
                survivor,
                absorbed_queued,
            } => {
                if let Some(gone) = absorbed_queued {
                    self.by_id.remove(&gone.id);
                }
                MergeOutcome::Merged {
                    survivor: survivor.id,
                    absorbed_queued: absorbed_queued.map(Place::id),
                }
            }
        }
    }
}

/// Queued requests in arrival order, with back merging: the kernel's noop
/// list plus the elevator core's merge hash, without a sort tree.
///
/// Each request has a place, a sequence number in arrival order; a slot
/// empties when its request leaves (dispatched, or swallowed by a merge)
/// and is dropped once it reaches the front. A back merge that closes a
/// gap lets the survivor swallow the queued request after it; the merged
/// request then leaves from the earlier of their two places, so no request
/// leaves later than its arrival order says.
///
/// Invariants: `len` counts the full slots; every entry of `by_end` and
/// `by_start` names the place of a queued request that ends, or starts, at
/// that sector; the front slot, if any, is full.
#[derive(Debug, Default)]
pub struct FifoQueue {
    slots: VecDeque<Option<Request>>,
    /// The place of `slots[0]`.
    front: u64,
    len: usize,
    by_end: FxHashMap<Sector, u64>,
    by_start: FxHashMap<Sector, u64>,
}

impl FifoQueue {
    pub fn new() -> Self {
        FifoQueue::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The queue's own consistency, for `Scheduler::check_invariants`: the
    /// count matches the full slots, and every index entry names a full
    /// slot whose request starts (`by_start`) or ends (`by_end`) there.
    pub fn check(&self) -> Result<(), String> {
        let full = self.slots.iter().flatten().count();
        if full != self.len {
            return Err(format!(
                "FIFO holds {full} requests but counts {}",
                self.len
            ));
        }
        let at = |place: u64| {
            place
                .checked_sub(self.front)
                .and_then(|i| self.slots.get(i as usize))
                .and_then(Option::as_ref)
        };
        for (&end, &place) in &self.by_end {
            match at(place) {
                Some(r) if r.end() == end => {}
                other => return Err(format!("by_end {end} names place {place}: {other:?}")),
            }
        }
        for (&start, &place) in &self.by_start {
            match at(place) {
                Some(r) if r.sector == start => {}
                other => return Err(format!("by_start {start} names place {place}: {other:?}")),
            }
        }
        Ok(())
    }

    fn slot(&mut self, place: u64) -> &mut Option<Request> {
        &mut self.slots[(place - self.front) as usize]
    }

    fn request(&mut self, place: u64) -> &mut Request {
        self.slot(place)
            .as_mut()
            .expect("a place in the index is full")
    }

    fn index(&mut self, r: &Request, place: u64) {
        self.by_end.insert(r.end(), place);
        self.by_start.insert(r.sector, place);
    }

    fn unindex(&mut self, r: &Request, place: u64) {
        if self.by_end.get(&r.end()) == Some(&place) {
            self.by_end.remove(&r.end());
        }
        if self.by_start.get(&r.sector) == Some(&place) {
            self.by_start.remove(&r.sector);
        }
    }

    /// Queue `request` at the back, or merge it into the queued request
    /// that ends where it starts. Returns whether it merged.
    pub fn insert(&mut self, request: Request, rule: &MergeRule) -> bool {
        if let Some(&place) = self.by_end.get(&request.sector) {
            if rule.compatible(self.request(place), &request) {
                self.extend_back(place, request);
                self.close_gap(place, rule);
                return true;
            }
        }
        let place = self.front + self.slots.len() as u64;
        self.index(&request, place);
        self.slots.push_back(Some(request));
        self.len += 1;
        false
    }

    /// Append `tail` to the queued request at `place`.
    fn extend_back(&mut self, place: u64, tail: Request) {
        let r = self.request(place);
        let old_end = r.end();
        r.sectors += tail.sectors;
        r.merged.extend(tail.ids());
        let new_end = r.end();
        if self.by_end.get(&old_end) == Some(&place) {
            self.by_end.remove(&old_end);
        }
        self.by_end.insert(new_end, place);
    }

    /// After a back merge into `place`: swallow the queued request that now
    /// starts where it ends, and leave from the earlier of the two places.
    fn close_gap(&mut self, place: u64, rule: &MergeRule) {
        let end = self.request(place).end();
        let Some(&next) = self.by_start.get(&end) else {
            return;
        };
        if next == place {
            return;
        }
        let (survivor, swallowed) = (
            &self.slots[(place - self.front) as usize],
            &self.slots[(next - self.front) as usize],
        );
        let (Some(survivor), Some(swallowed)) = (survivor, swallowed) else {
            unreachable!("indexed places are full");
        };
        if !rule.compatible(survivor, swallowed) {
            return;
        }
        let swallowed = self.slot(next).take().expect("full");
        self.unindex(&swallowed, next);
        self.len -= 1;
        self.extend_back(place, swallowed);
        if next < place {
            let merged = self.slot(place).take().expect("full");
            self.unindex(&merged, place);
            self.index(&merged, next);
            *self.slot(next) = Some(merged);
        }
        self.drop_empty_front();
    }

    fn drop_empty_front(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.front += 1;
        }
    }

    /// The request at the front.
    pub fn pop_front(&mut self) -> Option<Request> {
        let request = self.slots.pop_front()?.expect("the front slot is full");
        self.unindex(&request, self.front);
        self.front += 1;
        self.len -= 1;
        self.drop_empty_front();
        Some(request)
    }

    /// Queued requests, front first.
    pub fn iter(&self) -> impl Iterator<Item = &Request> + '_ {
        self.slots.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: MergeRule = MergeRule {
        max_sectors: 256,
        front_merges: true,
        same_task: false,
    };

    #[test]
    fn back_seek_prefers_sync_then_metadata_then_the_cheaper_seek() {
        let bs = BackSeek {
            max: 1000,
            penalty: 2,
        };
        let r = |sector| Request::read(1, 1, sector, 8);
        // Ahead 100 vs behind 40 (costing 80): the backward one.
        assert!(bs.prefers(&r(960), &r(1100), 1000));
        // Ahead 100 vs behind 60 (costing 120): forward.
        assert!(bs.prefers(&r(1100), &r(940), 1000));
        // Behind beyond `max` waits for the wrap.
        assert!(bs.prefers(&r(900_000), &r(0), 5000));
        // Both wrapped: the one furthest behind first.
        assert!(bs.prefers(&r(0), &r(100), 5000));
        let meta = Request {
            meta: true,
            ..r(900_000)
        };
        assert!(bs.prefers(&meta, &r(1008), 1000));
        let write = Request::write(2, 1, 1008, 8);
        assert!(bs.prefers(&meta, &write, 1000) && !bs.prefers(&write, &r(900_000), 1000));
    }

    fn ids(q: &SortedQueue) -> Vec<(u64, u64, u32)> {
        q.iter().map(|r| (r.id.0, r.sector, r.sectors)).collect()
    }

    #[test]
    fn back_and_front_merges_close_gaps() {
        let mut q = SortedQueue::new();
        q.insert(Request::read(1, 1, 0, 8));
        q.insert(Request::read(2, 1, 16, 8));
        // Fills [8,16): back merge into 1, then 1 swallows 2.
        let out = q.merge(Request::read(3, 1, 8, 8), &RULE);
        assert_eq!(
            out,
            MergeOutcome::Merged {
                survivor: RequestId(1),
                absorbed_queued: Some(RequestId(2))
            }
        );
        assert_eq!(ids(&q), vec![(1, 0, 24)]);
        let r = q.get(RequestId(1)).unwrap();
        let mut all: Vec<u64> = r.ids().map(|i| i.0).collect();
        all.sort();
        assert_eq!(all, vec![1, 2, 3]);
        // Front merge.
        q.insert(Request::read(4, 1, 100, 8));
        assert!(matches!(
            q.merge(Request::read(5, 1, 92, 8), &RULE),
            MergeOutcome::Merged {
                survivor: RequestId(4),
                absorbed_queued: None
            }
        ));
        assert_eq!(ids(&q), vec![(1, 0, 24), (4, 92, 16)]);
    }

    #[test]
    fn respects_direction_size_and_front_merge_switch() {
        let mut q = SortedQueue::new();
        q.insert(Request::read(1, 1, 0, 250));
        assert!(matches!(
            q.merge(Request::read(2, 1, 250, 8), &RULE),
            MergeOutcome::None(_)
        ));
        assert!(matches!(
            q.merge(Request::write(3, 1, 250, 4), &RULE),
            MergeOutcome::None(_)
        ));
        q.insert(Request::read(4, 1, 1000, 8));
        let no_front = MergeRule {
            front_merges: false,
            ..RULE
        };
        assert!(matches!(
            q.merge(Request::read(5, 1, 992, 8), &no_front),
            MergeOutcome::None(_)
        ));
        let per_task = MergeRule {
            same_task: true,
            ..RULE
        };
        assert!(matches!(
            q.merge(Request::read(6, 2, 1008, 8), &per_task),
            MergeOutcome::None(_)
        ));
    }

    #[test]
    fn ordered_navigation() {
        let mut q = SortedQueue::new();
        for (id, s) in [(1, 50), (2, 10), (3, 30)] {
            q.insert(Request::read(id, 1, s, 1));
        }
        assert_eq!(q.first(), Some(RequestId(2)));
        assert_eq!(q.next_after(RequestId(2)), Some(RequestId(3)));
        assert_eq!(q.prev_before(RequestId(3)), Some(RequestId(2)));
        assert_eq!(q.first_at_or_after(31), Some(RequestId(1)));
        assert_eq!(q.next_after(RequestId(1)), None);
        q.remove(RequestId(3));
        assert_eq!(q.next_after(RequestId(2)), Some(RequestId(1)));
    }

    /// Check the order index's invariants and compare it with `model`.
    fn check_index(index: &OrderIndex, model: &std::collections::BTreeMap<u128, Place>) {
        assert_eq!(index.heads.len(), index.chunks.len());
        for (head, chunk) in index.heads.iter().zip(&index.chunks) {
            assert!(!chunk.is_empty() && chunk.len() <= CHUNK);
            assert_eq!(*head, chunk[0].key());
        }
        let keys: Vec<(u128, Place)> = index.iter().map(|e| (e.key(), e.place)).collect();
        let expected: Vec<(u128, Place)> = model.iter().map(|(&k, &p)| (k, p)).collect();
        assert_eq!(keys, expected);
    }

    #[test]
    fn order_index_matches_a_btree() {
        use std::collections::BTreeMap;
        let mut rng = elevator_core::Prng::new(7);
        let mut index = OrderIndex::default();
        let mut model: BTreeMap<u128, Place> = BTreeMap::new();
        let (mut inserts, mut removals, mut hinted) = (0, 0, 0);
        for step in 0..40_000u64 {
            // Phases of growth and shrinkage, to split and join chunks; few
            // sectors, so that many requests share one.
            let grow = (step / 5_000) % 2 == 0;
            let sector = rng.below(600);
            let id = RequestId(rng.below(1 << 20));
            let key = order_key(sector, id);
            match rng.below(10) {
                0..=5 if grow || model.is_empty() => {
                    if !model.contains_key(&key) {
                        // Probe first, as a merge does, so that the insert
                        // can use the probe's position.
                        let probed = index.probe(key).map(|e| e.key());
                        assert_eq!(probed, model_after(&model, key), "probe");
                        let place = Place {
                            slot: step as u32,
                            id,
                        };
                        index.insert(sector, place);
                        model.insert(key, place);
                        inserts += 1;
                    }
                }
                0..=5 => {
                    // Remove a queued key, often the one after the last
                    // removal, as a sweep does.
                    let victim = match rng.below(2) {
                        0 => index.entry(index.after_removal).map(|e| e.key()),
                        _ => None,
                    }
                    .or_else(|| model.range(key..).next().map(|(&k, _)| k))
                    .or_else(|| model.keys().next().copied())
                    .expect("not empty");
                    hinted += usize::from(index.is_lower_bound(victim, index.after_removal));
                    let place = model.remove(&victim).expect("queued");
                    let next = index
                        .remove((victim >> 64) as u64, place.id)
                        .map(|e| e.key());
                    assert_eq!(next, model.range(victim..).next().map(|(&k, _)| k));
                    removals += 1;
                }
                6 | 7 => {
                    let found = index.at_or_after(key).map(|e| e.key());
                    assert_eq!(found, model_after(&model, key));
                }
                _ => {
                    let found = index.before(key).map(|e| e.key());
                    assert_eq!(found, model.range(..key).next_back().map(|(&k, _)| k));
                }
            }
            if step % 97 == 0 {
                check_index(&index, &model);
            }
        }
        check_index(&index, &model);
        eprintln!("{inserts} inserts, {removals} removals ({hinted} at the remembered place)");
        assert!(inserts > 10_000 && removals > 10_000 && hinted > 1_000);
    }

    fn model_after(model: &std::collections::BTreeMap<u128, Place>, key: u128) -> Option<u128> {
        model.range(key..).next().map(|(&k, _)| k)
    }

    #[test]
    fn placed_queue_places_go_stale_when_requests_leave() {
        let mut q = PlacedQueue::new();
        let a = q.insert(Request::read(1, 1, 100, 8));
        let b = q.insert(Request::read(2, 1, 300, 8));
        assert_eq!(q.at(a).map(|r| r.id), Some(RequestId(1)));
        assert_eq!(q.next_after(a), Some(b));
        assert_eq!(q.prev_before(b), Some(a));
        let (r, next) = q.remove_with_next(a).unwrap();
        assert_eq!((r.id, next), (RequestId(1), Some(b)));
        assert!(q.at(a).is_none() && q.remove(a).is_none());
        // The slot is reused, but the old place stays stale.
        let c = q.insert(Request::read(3, 1, 200, 8));
        assert_eq!(c.slot(), a.slot());
        assert!(q.at(a).is_none());
        assert_eq!(q.first(), Some(c));
        assert_eq!(q.first_at_or_after(201), Some(b));
        // A merge keeps the survivor's place and names the swallowed one.
        let out = q.merge(Request::read(4, 1, 208, 92), &RULE);
        assert_eq!(
            out,
            PlacedMerge::Merged {
                survivor: c,
                absorbed_queued: Some(b)
            }
        );
        assert!(q.at(b).is_none());
        assert_eq!(q.at(c).map(|r| (r.sector, r.sectors)), Some((200, 108)));
        assert_eq!(q.len(), 1);
    }

    fn fifo_ids(q: &FifoQueue) -> Vec<Vec<u64>> {
        q.iter()
            .map(|r| {
                let mut ids: Vec<u64> = r.ids().map(|i| i.0).collect();
                ids.sort();
                ids
            })
            .collect()
    }

    #[test]
    fn fifo_back_merges_only() {
        let mut q = FifoQueue::new();
        assert!(!q.insert(Request::read(1, 1, 500, 8), &RULE));
        assert!(!q.insert(Request::read(2, 1, 100, 8), &RULE));
        assert!(q.insert(Request::read(3, 2, 508, 8), &RULE));
        // Ends where 2 starts: no front merges in a FIFO.
        assert!(!q.insert(Request::read(4, 1, 92, 8), &RULE));
        assert!(!q.insert(Request::write(5, 1, 516, 8), &RULE));
        assert_eq!(q.len(), 4);
        assert_eq!(fifo_ids(&q), vec![vec![1, 3], vec![2], vec![4], vec![5]]);
        let first = q.pop_front().unwrap();
        assert_eq!((first.sector, first.sectors), (500, 16));
        assert_eq!(q.len(), 3);
        // 1 left, so nothing ends at 516 any more.
        assert!(!q.insert(Request::read(6, 1, 516, 8), &RULE));
    }

    #[test]
    fn fifo_gap_closing_keeps_the_earlier_place() {
        let mut q = FifoQueue::new();
        q.insert(Request::read(1, 1, 100, 8), &RULE);
        q.insert(Request::read(2, 2, 5000, 8), &RULE);
        q.insert(Request::read(3, 1, 84, 8), &RULE);
        assert!(q.insert(Request::read(4, 1, 92, 8), &RULE));
        assert_eq!(q.len(), 2);
        assert_eq!(fifo_ids(&q), vec![vec![1, 3, 4], vec![2]]);
        let r = q.pop_front().unwrap();
        assert_eq!((r.id.0, r.sector, r.sectors), (3, 84, 24));
        // The merged request is findable at its new place.
        assert!(q.insert(Request::read(5, 1, 5008, 8), &RULE));
        assert_eq!(fifo_ids(&q), vec![vec![2, 5]]);
        assert!(q.pop_front().is_some());
        assert!(q.pop_front().is_none() && q.is_empty());
    }

    #[test]
    fn fifo_gap_closing_respects_the_rule() {
        let mut q = FifoQueue::new();
        q.insert(Request::read(1, 1, 0, 8), &RULE);
        q.insert(Request::write(2, 1, 16, 8), &RULE);
        assert!(q.insert(Request::read(3, 1, 8, 8), &RULE));
        assert_eq!(fifo_ids(&q), vec![vec![1, 3], vec![2]]);
        let small = MergeRule {
            max_sectors: 16,
            ..RULE
        };
        let mut q = FifoQueue::new();
        q.insert(Request::read(1, 1, 0, 8), &small);
        q.insert(Request::read(2, 1, 16, 8), &small);
        assert!(q.insert(Request::read(3, 1, 8, 8), &small));
        assert_eq!(fifo_ids(&q), vec![vec![1, 3], vec![2]]);
    }
}
