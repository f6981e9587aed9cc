//! The page cache: which pages of which files are in memory, clean, dirty
//! or under writeback.
//!
//! Pages are tracked in *chunks* of 32 consecutive pages of one file (128
//! KiB, the largest readahead window), each a handful of 32-bit masks:
//! `present`, `uptodate` (present and not being read), `dirty` and
//! `writeback`. There is no per-page allocation: a chunk is a slot in a
//! slab found through one hash map keyed by (file, chunk index).
//!
//! Eviction is **LRU over chunks**: a chunk moves to the head when any of
//! its pages is read or written, and reclaim frees clean pages from the
//! tail. A chunk whose remaining pages cannot be freed (dirty, under
//! writeback, or being read) is rotated to the head, as 2.6's
//! `shrink_list` puts back pages it cannot free. This is a single LRU, not
//! 2.6's active/inactive pair: pages touched twice get no protection from
//! a streaming reader. Every 2003 experiment streams far more than memory
//! through the cache, so the difference would only show in what survives
//! between runs, which none of them measure.
//!
//! Dirty pages are indexed per file in offset order (for writeback in file
//! order), dirty files by the time they were first dirtied (for the
//! oldest-first order of the kernel's `s_dirty` list and for kupdate's
//! expiry), and dirty chunks by the time they went from clean to dirty:
//! 2.4's one list of dirty buffers (`lru_list[BUF_DIRTY]`, each buffer
//! appended when dirtied, written from the head), 32 buffers to a chunk.
//!
//! Invariants: `uptodate ⊆ present`, `dirty ⊆ uptodate`, `writeback ⊆
//! uptodate`; the counters equal the population counts of the masks; a
//! chunk with no present page does not exist.

use crate::fs::FileId;
use elevator_core::Instant;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// Pages per chunk.
pub const CHUNK_PAGES: u64 = 32;
const NIL: u32 = u32::MAX;

/// What a page looks like to a reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageState {
    Absent,
    /// In the cache, a read in flight.
    Locked,
    Uptodate,
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    key: u64,
    present: u32,
    uptodate: u32,
    dirty: u32,
    writeback: u32,
    /// When the chunk went from clean to dirty (its place on the dirty
    /// buffer list); meaningless while `dirty == 0`.
    dirtied: Instant,
    prev: u32,
    next: u32,
}

/// A file's dirty state.
#[derive(Clone, Copy, Debug)]
struct FileDirt {
    /// When the file went from clean to dirty (`dirtied_when`).
    since: Instant,
    pages: u64,
}

fn key(file: FileId, chunk: u64) -> u64 {
    (u64::from(file.0) << 32) | chunk
}

fn file_of(key: u64) -> FileId {
    FileId((key >> 32) as u32)
}

/// Bits `lo..hi` (0 <= lo < hi <= 32).
fn mask(lo: u64, hi: u64) -> u32 {
    let n = hi - lo;
    if n >= 32 {
        u32::MAX
    } else {
        ((1u32 << n) - 1) << lo
    }
}

/// Calls `f(chunk, mask)` for each chunk overlapping pages `[start, end)`.
fn for_chunks(start: u64, end: u64, mut f: impl FnMut(u64, u32)) {
    let mut p = start;
    while p < end {
        let c = p / CHUNK_PAGES;
        let lo = p % CHUNK_PAGES;
        let hi = (end - c * CHUNK_PAGES).min(CHUNK_PAGES);
        f(c, mask(lo, hi));
        p = (c + 1) * CHUNK_PAGES;
    }
}

/// Counters a run reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub pages_evicted: u64,
    /// Times reclaim found nothing to free and let the cache grow past its
    /// size (everything pinned by dirty, writeback or in-flight reads).
    pub overcommits: u64,
}

/// What [`PageCache::tail_scan`] met.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TailScan {
    /// Chunks with dirty pages or pages under writeback, tail first:
    /// (file, first page).
    pub busy: Vec<(FileId, u64)>,
    /// The clean pages met cover the allocation.
    pub enough: bool,
}

/// The page cache.
#[derive(Debug)]
pub struct PageCache {
    chunks: Vec<Chunk>,
    free_slots: Vec<u32>,
    map: FxHashMap<u64, u32>,
    head: u32,
    tail: u32,
    capacity: u64,
    present: u64,
    dirty: u64,
    writeback: u64,
    dirty_chunks: BTreeSet<u64>,
    /// Dirty chunks by (`dirtied`, key): oldest first.
    dirty_lru: BTreeSet<(Instant, u64)>,
    files: FxHashMap<u32, FileDirt>,
    dirty_order: BTreeSet<(Instant, u32)>,
    pub stats: CacheStats,
}

impl PageCache {
    /// A cache of `capacity` pages.
    pub fn new(capacity: u64) -> Self {
        PageCache {
            chunks: Vec::new(),
            free_slots: Vec::new(),
            map: FxHashMap::default(),
            head: NIL,
            tail: NIL,
            capacity,
            present: 0,
            dirty: 0,
            writeback: 0,
            dirty_chunks: BTreeSet::new(),
            dirty_lru: BTreeSet::new(),
            files: FxHashMap::default(),
            dirty_order: BTreeSet::new(),
            stats: CacheStats::default(),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    pub fn present(&self) -> u64 {
        self.present
    }
    /// `nr_dirty`.
    pub fn dirty(&self) -> u64 {
        self.dirty
    }
    /// `nr_writeback`.
    pub fn writeback(&self) -> u64 {
        self.writeback
    }

    fn slot(&self, file: FileId, chunk: u64) -> Option<u32> {
        self.map.get(&key(file, chunk)).copied()
    }

    pub fn state(&self, file: FileId, page: u64) -> PageState {
        let Some(s) = self.slot(file, page / CHUNK_PAGES) else {
            return PageState::Absent;
        };
        let c = &self.chunks[s as usize];
        let bit = 1u32 << (page % CHUNK_PAGES);
        if c.uptodate & bit != 0 {
            PageState::Uptodate
        } else if c.present & bit != 0 {
            PageState::Locked
        } else {
            PageState::Absent
        }
    }

    pub fn is_dirty(&self, file: FileId, page: u64) -> bool {
        self.slot(file, page / CHUNK_PAGES)
            .is_some_and(|s| self.chunks[s as usize].dirty & (1 << (page % CHUNK_PAGES)) != 0)
    }

    /// Mark `page`'s chunk recently used.
    pub fn touch(&mut self, file: FileId, page: u64) {
        if let Some(s) = self.slot(file, page / CHUNK_PAGES) {
            self.unlink(s);
            self.push_head(s);
        }
    }

    /// Pages of `[start, end)` that are absent, as maximal runs.
    pub fn absent_runs(&self, file: FileId, start: u64, end: u64, out: &mut Vec<(u64, u64)>) {
        out.clear();
        let mut run: Option<(u64, u64)> = None;
        for p in start..end {
            let absent = self.state(file, p) == PageState::Absent;
            match (&mut run, absent) {
                (Some((_, n)), true) => *n += 1,
                (None, true) => run = Some((p, 1)),
                (Some(r), false) => {
                    out.push(*r);
                    run = None;
                }
                (None, false) => {}
            }
        }
        out.extend(run);
    }

    fn unlink(&mut self, s: u32) {
        let Chunk { prev, next, .. } = self.chunks[s as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.chunks[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.chunks[next as usize].prev = prev;
        }
        let c = &mut self.chunks[s as usize];
        c.prev = NIL;
        c.next = NIL;
    }

    fn push_head(&mut self, s: u32) {
        let old = self.head;
        {
            let c = &mut self.chunks[s as usize];
            c.prev = NIL;
            c.next = old;
        }
        if old == NIL {
            self.tail = s;
        } else {
            self.chunks[old as usize].prev = s;
        }
        self.head = s;
    }

    /// The chunk's slot, creating an empty chunk at the LRU head.
    fn slot_or_new(&mut self, file: FileId, chunk: u64) -> u32 {
        let k = key(file, chunk);
        if let Some(&s) = self.map.get(&k) {
            return s;
        }
        let c = Chunk {
            key: k,
            present: 0,
            uptodate: 0,
            dirty: 0,
            writeback: 0,
            dirtied: Instant::ZERO,
            prev: NIL,
            next: NIL,
        };
        let s = match self.free_slots.pop() {
            Some(s) => {
                self.chunks[s as usize] = c;
                s
            }
            None => {
                self.chunks.push(c);
                (self.chunks.len() - 1) as u32
            }
        };
        self.map.insert(k, s);
        self.push_head(s);
        s
    }

    fn drop_chunk(&mut self, s: u32) {
        self.unlink(s);
        let k = self.chunks[s as usize].key;
        self.map.remove(&k);
        self.free_slots.push(s);
    }

    /// Free clean pages from the LRU tail until `need` more pages fit.
    fn make_room(&mut self, need: u64) {
        let mut budget = self.map.len() + 1;
        while self.present + need > self.capacity {
            let s = self.tail;
            if s == NIL || budget == 0 {
                self.stats.overcommits += 1;
                return;
            }
            budget -= 1;
            let c = self.chunks[s as usize];
            let droppable = c.uptodate & !c.dirty & !c.writeback;
            if droppable != 0 {
                let n = u64::from(droppable.count_ones());
                let c = &mut self.chunks[s as usize];
                c.present &= !droppable;
                c.uptodate &= !droppable;
                self.present -= n;
                self.stats.pages_evicted += n;
            }
            if self.chunks[s as usize].present == 0 {
                self.drop_chunk(s);
            } else {
                self.unlink(s);
                self.push_head(s);
            }
        }
    }

    /// Drop the clean, idle pages of `file` (`invalidate_mapping_pages`:
    /// dirty pages, pages under writeback and pages being read stay).
    /// Returns how many went.
    pub fn drop_clean(&mut self, file: FileId) -> u64 {
        let slots: Vec<u32> = self
            .map
            .iter()
            .filter(|(k, _)| file_of(**k) == file)
            .map(|(_, s)| *s)
            .collect();
        let mut dropped = 0;
        for s in slots {
            let c = self.chunks[s as usize];
            let droppable = c.uptodate & !c.dirty & !c.writeback;
            if droppable == 0 {
                continue;
            }
            let n = u64::from(droppable.count_ones());
            let c = &mut self.chunks[s as usize];
            c.present &= !droppable;
            c.uptodate &= !droppable;
            self.present -= n;
            dropped += n;
            if self.chunks[s as usize].present == 0 {
                self.drop_chunk(s);
            }
        }
        dropped
    }

    /// Add the absent pages of `[start, end)` as present, not up to date (a
    /// read is about to fill them). Returns how many were added.
    pub fn insert_locked(&mut self, file: FileId, start: u64, end: u64) -> u64 {
        let mut added = 0;
        for_chunks(start, end, |c, m| {
            let absent = match self.slot(file, c) {
                Some(s) => m & !self.chunks[s as usize].present,
                None => m,
            };
            added += u64::from(absent.count_ones());
        });
        if added == 0 {
            return 0;
        }
        self.make_room(added);
        for_chunks(start, end, |c, m| {
            let s = self.slot_or_new(file, c);
            let ch = &mut self.chunks[s as usize];
            ch.present |= m;
        });
        self.present += added;
        added
    }

    /// A read of `[start, end)` failed: its pages, still not up to date,
    /// leave the cache, so the next access reads them again (the kernel
    /// keeps them, not up to date, and a reader's `readpage` retries; the
    /// effect on I/O is the same).
    pub fn fail_read(&mut self, file: FileId, start: u64, end: u64) {
        for_chunks(start, end, |c, m| {
            let Some(s) = self.slot(file, c) else { return };
            let ch = &mut self.chunks[s as usize];
            let locked = m & ch.present & !ch.uptodate & !ch.dirty & !ch.writeback;
            ch.present &= !locked;
            self.present -= u64::from(locked.count_ones());
            if self.chunks[s as usize].present == 0 {
                self.drop_chunk(s);
            }
        });
    }

    /// A read of `[start, end)` completed.
    pub fn mark_uptodate(&mut self, file: FileId, start: u64, end: u64) {
        for_chunks(start, end, |c, m| {
            if let Some(s) = self.slot(file, c) {
                let ch = &mut self.chunks[s as usize];
                ch.uptodate |= m & ch.present;
            }
        });
    }

    /// Dirty `[start, end)`: absent pages are added (a write covering the
    /// whole page needs no read), present ones must be up to date. Returns
    /// the pages newly dirtied.
    pub fn dirty_range(&mut self, file: FileId, start: u64, end: u64, now: Instant) -> u64 {
        let mut absent = 0;
        for_chunks(start, end, |c, m| {
            absent += u64::from(match self.slot(file, c) {
                Some(s) => (m & !self.chunks[s as usize].present).count_ones(),
                None => m.count_ones(),
            });
        });
        if absent > 0 {
            self.make_room(absent);
        }
        let mut newly = 0u64;
        let mut new_chunks = Vec::new();
        for_chunks(start, end, |c, m| {
            let s = self.slot_or_new(file, c);
            let ch = &mut self.chunks[s as usize];
            debug_assert_eq!(
                ch.present & m & !ch.uptodate,
                0,
                "dirtying a page being read"
            );
            ch.present |= m;
            ch.uptodate |= m;
            let fresh = m & !ch.dirty;
            if ch.dirty == 0 && fresh != 0 {
                ch.dirtied = now;
                new_chunks.push(ch.key);
            }
            ch.dirty |= m;
            newly += u64::from(fresh.count_ones());
            self.unlink(s);
            self.push_head(s);
        });
        self.present += absent;
        self.dirty_lru.extend(new_chunks.iter().map(|&k| (now, k)));
        self.dirty_chunks.extend(new_chunks);
        if newly > 0 {
            self.dirty += newly;
            let d = self.files.entry(file.0).or_insert(FileDirt {
                since: now,
                pages: 0,
            });
            if d.pages == 0 {
                d.since = now;
                self.dirty_order.insert((now, file.0));
            }
            d.pages += newly;
        }
        newly
    }

    fn undirty_file(&mut self, file: FileId, n: u64) {
        if n == 0 {
            return;
        }
        self.dirty -= n;
        let d = self.files.get_mut(&file.0).expect("dirty file");
        d.pages -= n;
        if d.pages == 0 {
            let since = d.since;
            self.files.remove(&file.0);
            self.dirty_order.remove(&(since, file.0));
        }
    }

    /// Start writeback of the first run of pages at or after `from` that
    /// are dirty and not already under writeback, at most `max` pages and
    /// not past `limit`: their dirty bits move to writeback. Returns the run.
    pub fn start_writeback(
        &mut self,
        file: FileId,
        from: u64,
        limit: u64,
        max: u64,
    ) -> Option<(u64, u64)> {
        let lo = key(file, from / CHUNK_PAGES);
        let hi = key(file, limit.div_ceil(CHUNK_PAGES).min(u64::from(u32::MAX)));
        let mut first: Option<u64> = None;
        for &k in self.dirty_chunks.range(lo..hi) {
            let s = self.map[&k] as usize;
            let c = &self.chunks[s];
            let base = (k & 0xffff_ffff) * CHUNK_PAGES;
            let mut ready = c.dirty & !c.writeback;
            if base < from {
                ready &= !mask(0, from - base);
            }
            if ready != 0 {
                first = Some(base + u64::from(ready.trailing_zeros()));
                break;
            }
        }
        let start = first.filter(|&p| p < limit)?;
        let mut len = 0;
        let mut p = start;
        while len < max && p < limit {
            let Some(s) = self.slot(file, p / CHUNK_PAGES) else {
                break;
            };
            let c = &self.chunks[s as usize];
            let bit = 1u32 << (p % CHUNK_PAGES);
            if c.dirty & bit == 0 || c.writeback & bit != 0 {
                break;
            }
            len += 1;
            p += 1;
        }
        for_chunks(start, start + len, |c, m| {
            let s = self.map[&key(file, c)] as usize;
            let ch = &mut self.chunks[s];
            ch.dirty &= !m;
            ch.writeback |= m;
            if ch.dirty == 0 {
                self.dirty_chunks.remove(&ch.key);
                self.dirty_lru.remove(&(ch.dirtied, ch.key));
            }
        });
        self.writeback += len;
        self.undirty_file(file, len);
        Some((start, len))
    }

    /// Writeback of `[start, end)` completed (pages redirtied meanwhile stay
    /// dirty).
    pub fn end_writeback(&mut self, file: FileId, start: u64, end: u64) {
        let mut n = 0;
        for_chunks(start, end, |c, m| {
            if let Some(s) = self.slot(file, c) {
                let ch = &mut self.chunks[s as usize];
                n += u64::from((ch.writeback & m).count_ones());
                ch.writeback &= !m;
            }
        });
        self.writeback -= n;
    }

    /// Dirty pages of `file`.
    pub fn file_dirty(&self, file: FileId) -> u64 {
        self.files.get(&file.0).map_or(0, |d| d.pages)
    }

    /// When `file` was first dirtied, if it is dirty.
    pub fn dirtied_when(&self, file: FileId) -> Option<Instant> {
        self.files.get(&file.0).map(|d| d.since)
    }

    /// Dirty files, oldest first, from position `after` (exclusive).
    pub fn next_dirty_file(&self, after: Option<(Instant, u32)>) -> Option<(Instant, FileId)> {
        let it = match after {
            Some(a) => self
                .dirty_order
                .range((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded))
                .next(),
            None => self.dirty_order.iter().next(),
        };
        it.map(|&(t, f)| (t, FileId(f)))
    }

    /// Whether `file` has a page under writeback in `[start, end)`.
    pub fn under_writeback(&self, file: FileId, start: u64, end: u64) -> bool {
        let mut any = false;
        for_chunks(start, end, |c, m| {
            if let Some(s) = self.slot(file, c) {
                any |= self.chunks[s as usize].writeback & m != 0;
            }
        });
        any
    }

    /// The dirty list (chunks by when they went from clean to dirty) from
    /// position `after` (exclusive): the position, the file and the
    /// chunk's first page. `None` starts at the head, the oldest.
    pub fn next_dirty_chunk(
        &self,
        after: Option<(Instant, u64)>,
    ) -> Option<((Instant, u64), FileId, u64)> {
        let it = match after {
            Some(a) => self
                .dirty_lru
                .range((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded))
                .next(),
            None => self.dirty_lru.first(),
        };
        it.map(|&(t, k)| ((t, k), file_of(k), (k & 0xffff_ffff) * CHUNK_PAGES))
    }

    /// What reclaim meets from the LRU tail while it looks for `need`
    /// clean pages among at most `max_scan` present pages, without freeing
    /// anything: the chunks with dirty pages or pages under writeback,
    /// tail first, and whether the clean pages found cover `need` (as
    /// `PageCache::make_room` will free them).
    pub fn tail_scan(&self, need: u64, max_scan: u64) -> TailScan {
        let mut scan = TailScan::default();
        let mut want = (self.present + need).saturating_sub(self.capacity);
        let mut scanned = 0;
        let mut s = self.tail;
        while want > 0 && s != NIL && scanned < max_scan {
            let c = &self.chunks[s as usize];
            scanned += u64::from(c.present.count_ones());
            let clean = u64::from((c.uptodate & !c.dirty & !c.writeback).count_ones());
            want = want.saturating_sub(clean);
            if c.dirty | c.writeback != 0 {
                let base = (c.key & 0xffff_ffff) * CHUNK_PAGES;
                scan.busy.push((file_of(c.key), base));
            }
            s = c.prev;
        }
        scan.enough = want == 0;
        scan
    }

    /// Check the invariants (tests).
    pub fn check(&self) {
        let (mut p, mut d, mut w) = (0u64, 0u64, 0u64);
        let mut per_file: FxHashMap<u32, u64> = FxHashMap::default();
        for (&k, &s) in &self.map {
            let c = &self.chunks[s as usize];
            assert_eq!(c.key, k);
            assert_ne!(c.present, 0, "empty chunk kept");
            assert_eq!(c.uptodate & !c.present, 0);
            assert_eq!(c.dirty & !c.uptodate, 0);
            assert_eq!(c.writeback & !c.uptodate, 0);
            assert_eq!(c.dirty != 0, self.dirty_chunks.contains(&k));
            assert_eq!(c.dirty != 0, self.dirty_lru.contains(&(c.dirtied, k)));
            p += u64::from(c.present.count_ones());
            d += u64::from(c.dirty.count_ones());
            w += u64::from(c.writeback.count_ones());
            *per_file.entry(file_of(k).0).or_default() += u64::from(c.dirty.count_ones());
        }
        assert_eq!((p, d, w), (self.present, self.dirty, self.writeback));
        for (f, n) in per_file {
            assert_eq!(n, self.file_dirty(FileId(f)), "file {f} dirty count");
        }
        assert_eq!(self.files.len(), self.dirty_order.len());
        assert_eq!(self.dirty_lru.len(), self.dirty_chunks.len());
        let mut n = 0;
        let mut s = self.head;
        while s != NIL {
            n += 1;
            s = self.chunks[s as usize].next;
        }
        assert_eq!(n, self.map.len(), "LRU list length");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: FileId = FileId(5);
    const G: FileId = FileId(6);

    #[test]
    fn read_fill_and_evict_lru() {
        let mut c = PageCache::new(64);
        assert_eq!(c.insert_locked(F, 0, 40), 40);
        assert_eq!(c.state(F, 3), PageState::Locked);
        c.mark_uptodate(F, 0, 40);
        assert_eq!(c.state(F, 39), PageState::Uptodate);
        assert_eq!(c.insert_locked(F, 30, 50), 10);
        c.mark_uptodate(F, 40, 50);
        // Touch the first chunk so the second is the LRU tail.
        c.touch(F, 0);
        assert_eq!(c.insert_locked(G, 0, 30), 30);
        c.check();
        // The LRU chunk (pages 32..50) went whole; the touched one stayed.
        assert_eq!(c.present(), 62);
        assert_eq!(c.state(F, 0), PageState::Uptodate);
        assert_eq!(c.state(F, 45), PageState::Absent, "LRU chunk evicted");
        assert_eq!(c.stats.pages_evicted, 18);
    }

    #[test]
    fn dirty_writeback_and_redirty() {
        let mut c = PageCache::new(1000);
        let t = Instant(7);
        assert_eq!(c.dirty_range(F, 10, 50, t), 40);
        assert_eq!(c.dirtied_when(F), Some(t));
        assert_eq!(c.start_writeback(F, 0, u64::MAX, 16), Some((10, 16)));
        assert_eq!((c.dirty(), c.writeback()), (24, 16));
        // Redirty a page under writeback: it is dirty and under writeback.
        assert_eq!(c.dirty_range(F, 12, 13, Instant(9)), 1);
        assert_eq!(c.start_writeback(F, 0, u64::MAX, 100), Some((26, 24)));
        assert_eq!(
            c.start_writeback(F, 0, u64::MAX, 100),
            None,
            "page 12 waits for its writeback"
        );
        c.end_writeback(F, 10, 26);
        c.check();
        assert_eq!(c.start_writeback(F, 0, u64::MAX, 100), Some((12, 1)));
        c.end_writeback(F, 0, 100);
        assert_eq!((c.dirty(), c.writeback()), (0, 0));
        assert_eq!(c.dirtied_when(F), None);
        c.check();
    }

    #[test]
    fn dirty_pages_are_not_evicted() {
        let mut c = PageCache::new(64);
        c.dirty_range(F, 0, 64, Instant(1));
        c.insert_locked(G, 0, 8);
        assert_eq!(c.stats.overcommits, 1);
        assert_eq!(c.dirty(), 64);
        c.check();
    }
}
