//! The sector-sorted request queue with front and back merging that every
//! sorting policy shares (the kernel's elevator rbtree plus merge hash).
//!
//! Requests are stored once, by id; a B-tree orders them by start sector and
//! a hash finds the request ending where a new one starts (back merge). A
//! front merge looks the tree up for a request starting where the new one
//! ends. After either merge the survivor is tried against its new neighbour
//! (the kernel's `attempt_back_merge`/`attempt_front_merge`), so a gap that
//! a request fills closes completely.
//!
//! Invariants: `by_sector` and `requests` hold the same ids; every entry of
//! `by_end` points at a queued request ending at that sector; no merged
//! request exceeds `MergeRule::max_sectors`.
//!
//! [`FifoQueue`] is the same merging without the sort tree, for a policy
//! that only keeps arrival order (noop): a list plus the merge hash.

use elevator_core::{Op, Request, RequestId, Sector};
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

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

/// Queued requests sorted by start sector.
#[derive(Debug, Default)]
pub struct SortedQueue {
    by_sector: BTreeMap<(Sector, RequestId), ()>,
    by_end: FxHashMap<Sector, RequestId>,
    requests: FxHashMap<RequestId, Request>,
}

impl SortedQueue {
    pub fn new() -> Self {
        SortedQueue::default()
    }

    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    pub fn contains(&self, id: RequestId) -> bool {
        self.requests.contains_key(&id)
    }

    pub fn get(&self, id: RequestId) -> Option<&Request> {
        self.requests.get(&id)
    }

    /// Queue `request` without trying to merge it.
    pub fn insert(&mut self, request: Request) {
        let id = request.id;
        self.by_sector.insert((request.sector, id), ());
        self.by_end.insert(request.end(), id);
        let old = self.requests.insert(id, request);
        debug_assert!(old.is_none(), "request {id:?} queued twice");
    }

    /// Remove a queued request.
    pub fn remove(&mut self, id: RequestId) -> Option<Request> {
        let request = self.requests.remove(&id)?;
        self.by_sector.remove(&(request.sector, id));
        self.unindex_end(request.end(), id);
        Some(request)
    }

    /// Remove a queued request and tell which request follows it in sector
    /// order (what `next_after` would have said), in one pass.
    pub fn remove_with_next(&mut self, id: RequestId) -> Option<(Request, Option<RequestId>)> {
        let request = self.requests.remove(&id)?;
        let key = (request.sector, id);
        self.by_sector.remove(&key);
        let next = self
            .by_sector
            .range((Bound::Excluded(key), Bound::Unbounded))
            .next()
            .map(|(&(_, id), _)| id);
        self.unindex_end(request.end(), id);
        Some((request, next))
    }

    /// Forget that `id` ends at `end`, if the hash still says so.
    fn unindex_end(&mut self, end: Sector, id: RequestId) {
        if let Entry::Occupied(e) = self.by_end.entry(end) {
            if *e.get() == id {
                e.remove();
            }
        }
    }

    /// The queued request with the lowest start sector.
    pub fn first(&self) -> Option<RequestId> {
        self.by_sector.keys().next().map(|&(_, id)| id)
    }

    /// The first request starting at or after `sector`.
    pub fn first_at_or_after(&self, sector: Sector) -> Option<RequestId> {
        self.by_sector
            .range((sector, RequestId(0))..)
            .next()
            .map(|(&(_, id), _)| id)
    }

    /// The request after `id` in sector order (no wrap-around).
    pub fn next_after(&self, id: RequestId) -> Option<RequestId> {
        let r = self.requests.get(&id)?;
        self.by_sector
            .range((Bound::Excluded((r.sector, id)), Bound::Unbounded))
            .next()
            .map(|(&(_, id), _)| id)
    }

    /// The request before `id` in sector order.
    pub fn prev_before(&self, id: RequestId) -> Option<RequestId> {
        let r = self.requests.get(&id)?;
        self.by_sector
            .range(..(r.sector, id))
            .next_back()
            .map(|(&(_, id), _)| id)
    }

    /// Ids in ascending sector order.
    pub fn iter(&self) -> impl Iterator<Item = &Request> + '_ {
        self.by_sector.keys().map(|(_, id)| &self.requests[id])
    }

    /// Try to merge `request` into a queued neighbour under `rule`.
    pub fn merge(&mut self, request: Request, rule: &MergeRule) -> MergeOutcome {
        // Back merge: a queued request ends where this one starts.
        if let Some(&id) = self.by_end.get(&request.sector) {
            if rule.compatible(&self.requests[&id], &request) {
                self.extend_back(id, request);
                let absorbed_queued = self.coalesce_forward(id, rule);
                return MergeOutcome::Merged {
                    survivor: id,
                    absorbed_queued,
                };
            }
        }
        // Front merge: a queued request starts where this one ends.
        if rule.front_merges {
            let end = request.end();
            if let Some(id) = self.first_at_or_after(end) {
                let queued = &self.requests[&id];
                if queued.sector == end && rule.compatible(queued, &request) {
                    self.extend_front(id, request);
                    let absorbed_queued = self.coalesce_backward(id, rule);
                    return MergeOutcome::Merged {
                        survivor: id,
                        absorbed_queued,
                    };
                }
            }
        }
        MergeOutcome::None(request)
    }

    /// Append `tail`'s sectors to queued request `id`.
    fn extend_back(&mut self, id: RequestId, tail: Request) {
        let r = self.requests.get_mut(&id).expect("queued");
        let old_end = r.end();
        r.sectors += tail.sectors;
        r.merged.extend(tail.ids());
        let new_end = r.end();
        self.unindex_end(old_end, id);
        self.by_end.insert(new_end, id);
    }

    /// Prepend `head`'s sectors to queued request `id` (re-keys it).
    fn extend_front(&mut self, id: RequestId, head: Request) {
        let r = self.requests.get_mut(&id).expect("queued");
        self.by_sector.remove(&(r.sector, id));
        r.sector = head.sector;
        r.sectors += head.sectors;
        r.merged.extend(head.ids());
        self.by_sector.insert((r.sector, id), ());
    }

    /// After a back merge into `id`, swallow the queued request that now
    /// starts where `id` ends, if allowed.
    fn coalesce_forward(&mut self, id: RequestId, rule: &MergeRule) -> Option<RequestId> {
        let end = self.requests[&id].end();
        let next = self.first_at_or_after(end)?;
        let n = &self.requests[&next];
        if next == id || n.sector != end || !rule.compatible(&self.requests[&id], n) {
            return None;
        }
        let n = self.remove(next).expect("queued");
        self.extend_back(id, n);
        Some(next)
    }

    /// After a front merge into `id`, let the queued request that ends where
    /// `id` now starts swallow `id` (the survivor keeps the lower sector).
    fn coalesce_backward(&mut self, id: RequestId, rule: &MergeRule) -> Option<RequestId> {
        let start = self.requests[&id].sector;
        let &prev = self.by_end.get(&start)?;
        if prev == id || !rule.compatible(&self.requests[&prev], &self.requests[&id]) {
            return None;
        }
        // Keep `id` as the survivor so callers' references stay valid:
        // take the lower request's sectors into it.
        let p = self.remove(prev).expect("queued");
        self.extend_front(id, p);
        Some(prev)
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
